"""What the pipeline hands the integrity review for one submission, and what it gets back.

The pipeline (``autograder.grade``) calls ``autograder.integrity.review(ctx)`` once per
submission, right after nbgrader's autograde of that submission and before its grades
are used for feedback or export. ``review`` returns a :class:`Review`; the pipeline
records ``flags`` in the report (fate "flagged" when there is any) and sets the
``auto_score`` of every grade in ``zero_cells`` to 0 in the gradebook.

The audit log: every student kernel starts through ``autograder.kernel_entry``, which
calls ``autograder.audit.install(path)`` (when that module exists) with the path in the
environment variable ``COURSE_GRADE_AUDIT_LOG`` (see :data:`AUDIT_LOG_ENV`). The pipeline
points it at ``ctx.audit_log``: a file in a per-submission scratch folder OUTSIDE the
work dir (so nbgrader never copies it into feedback), bound read-write into the sandbox
at the same path. The student's code can write to it (the kernel must), so a missing,
truncated or garbled log is itself suspicious.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol

AUDIT_LOG_ENV = "COURSE_GRADE_AUDIT_LOG"


class KernelLauncher(Protocol):
    def __call__(self, work_dir: Path, audit_log: Optional[Path] = None):
        """Start a kernel under the same sandbox and limits as the student's.

        ``work_dir`` is bound read-write and is the kernel's cwd; nothing else of the
        course is visible. Returns a started ``jupyter_client.KernelManager`` (sync API);
        get a client with ``km.client()`` and ``kc.start_channels(); kc.wait_for_ready()``.
        The caller must ``km.shutdown_kernel(now=True)`` when done (use try/finally).
        ``audit_log`` (optional) is passed to the kernel as ``COURSE_GRADE_AUDIT_LOG``.
        """


@dataclass(frozen=True)
class GradingContext:
    student_id: str
    assignment_id: str
    course_root: Path
    # autograded/<student>/<assignment>: where nbgrader ran the student's notebook.
    work_dir: Path
    # submitted/<student>/<assignment>/<notebook>.ipynb, as the student handed it in.
    submitted_nb: Path
    # autograded/<student>/<assignment>/<notebook>.ipynb, after nbgrader's run.
    autograded_nb: Path
    # source/<assignment>/<notebook>.ipynb, with solutions and hidden tests.
    source_nb: Path
    # The kernel's audit log (see the module docstring); may be missing if the kernel
    # never started or the student deleted it.
    audit_log: Path
    launch_kernel: KernelLauncher
    # A scratch folder for the review (clean-room work dirs, recordings); outside the
    # course's autograded/ and feedback/ trees, removed by the pipeline afterwards.
    scratch_dir: Optional[Path] = None
    # Per-cell execution timeout in seconds (nbgrader's Execute.timeout).
    cell_timeout: int = 30
    # A warm clean-room kernel to reuse (``autograder.cleanroom.CleanRoom``, one per
    # grading worker); None: the review starts a fresh one for this submission.
    clean_room: Optional[object] = None


@dataclass
class Review:
    # Human-readable reasons, e.g. "patches IPython's showtraceback (cell 'q2_answer')".
    flags: list[str] = field(default_factory=list)
    # grade_ids of autograded test cells whose pass must be revoked (auto_score -> 0).
    zero_cells: set[str] = field(default_factory=set)


ReviewFunction = Callable[[GradingContext], Review]
