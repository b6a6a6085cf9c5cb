"""Grade one submission, start to finish, in a worker process of the pool.

nbgrader's own autograde does the work (sanitize, restore the test cells, run, save the
grades), with its Execute swapped for ``autograder.execute.TwoKernelExecute``: answer
cells in a sandboxed student kernel, test cells in this worker's warm, sandboxed test
kernel. Then feedback is generated. The host's part never reads a file a kernel could
have written: both kernels work in their own tmpfs, and their staged inputs are copies
of regular files made here (``autograder.safefiles``). Nothing in here raises: every
failure becomes the submission's fate, and the batch goes on.
"""
from __future__ import annotations

import ctypes
import io
import logging
import shutil
import signal
import tempfile
import time
from pathlib import Path

from autograder import execute, fates, safefiles, testkernel
from autograder.config import file_limits, grading_config

DB_RETRIES = 3
# The test kernel of slot N runs as uid_base + TEST_UID_OFFSET + N: never the uid of a
# student kernel, so it counts against no student's process limit.
TEST_UID_OFFSET = 1000
_SLOT = {"uid": -1, "test_uid": -1}
_STAGED: dict = {}  # assignment -> this worker's staged copy of the test files


def init_worker(slots, uid_base: int) -> None:
    """Pool initializer: die with the parent, and take a slot (its own kernel uids)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    slot = slots.get()
    if uid_base >= 0:  # -1: not root, no uid to give (autograder.sandbox)
        _SLOT["uid"] = uid_base + slot
        _SLOT["test_uid"] = uid_base + TEST_UID_OFFSET + slot
    import atexit

    atexit.register(_cleanup)


def grade_submission(course_root: str, assignment: str, student: str, digest: str,
                     sandbox: bool) -> dict:
    start = time.monotonic()
    root = Path(course_root)
    scratch = Path(tempfile.mkdtemp(prefix="cg-", dir="/tmp"))
    scratch.chmod(0o755)
    try:
        outcome = _grade(root, assignment, student, scratch, sandbox)
    except Exception as exc:  # the grader's own bug must not stop the batch
        outcome = fates.Outcome(student, fates.ERROR, details=[f"{type(exc).__name__}: {exc}"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    outcome.digest = digest
    outcome.seconds = round(time.monotonic() - start, 2)
    return outcome.as_dict()


def _grade(root: Path, assignment: str, student: str, scratch: Path, sandbox: bool):
    clock = _Clock()
    config = _config(root, assignment, student, scratch, sandbox)
    for attempt in range(2):
        execute.LAST_RUN.clear()
        ok, log = _run_nbgrader("Autograde", config)
        events = execute.LAST_RUN.get("events", [])
        # A worn test kernel must not cost a student a point: once more on a fresh one.
        if attempt == 0 and any(e["event"] == "needs_review" and e.get("reused") for e in events):
            testkernel.close_all()
            continue
        break
    clock.lap("autograde")
    # Where autograde's time went: the two kernels' steps, and nbgrader's own
    # (sanitize, restore the tests, save the grades, write the notebook).
    steps = execute.LAST_RUN.get("seconds", {})
    if steps:
        clock.laps["nbgrader's own steps"] = round(clock.laps.pop("autograde") - sum(steps.values()), 3)
        clock.laps.update(steps)
    if not ok:
        return fates.Outcome(student, fates.ERROR, details=["nbgrader autograde failed: " + _tail(log)],
                             phases=clock.laps)
    fate, details = fates.decide(events)
    feedback_ok, feedback_log = _run_nbgrader("GenerateFeedback", config)
    clock.lap("feedback")
    if not feedback_ok:
        details.append("feedback failed: " + _tail(feedback_log))
    score, max_score = _scores(config, assignment, student)
    return fates.Outcome(student, fate, score, max_score, details, phases=clock.laps)


def _config(root: Path, assignment: str, student: str, scratch: Path, sandbox: bool):
    config = grading_config(root)
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = student
    each, total = file_limits(config)
    config.SandboxMixin.use_bwrap = sandbox
    config.SandboxMixin.uid = _SLOT["uid"] if sandbox else -1
    config.SandboxMixin.runtime_root = str(scratch)
    config.SandboxMixin.staging = str(_student_files(root, assignment, student, scratch,
                                                     each, total))
    config.TwoKernelExecute.source_notebook = str(_source_notebook(root, assignment))
    config.TwoKernelExecute.test_files = str(_test_files(root, assignment, each, total))
    config.TwoKernelExecute.test_uid = _SLOT["test_uid"] if sandbox else -1
    return config


def _source_notebook(root: Path, assignment: str) -> Path:
    notebooks = sorted((root / "source" / assignment).glob("*.ipynb"))
    return notebooks[0]


def _student_files(root, assignment, student, scratch, each, total) -> Path:
    """The student's kernel's files: the submission's own, then the release's data over
    them, never a notebook (the autograded one holds the hidden tests)."""
    not_notebook = lambda rel: rel.endswith(".ipynb") or rel == "timestamp.txt"  # noqa: E731
    files, _ = safefiles.regular_files(root / "submitted" / student / assignment, each, total,
                                       skip=not_notebook)
    release = root / "release" / assignment
    if release.is_dir():
        files.update(safefiles.regular_files(release, each, total, skip=not_notebook)[0])
    dest = scratch / "student-files"
    safefiles.write_tree(dest, files)
    return dest


def _test_files(root: Path, assignment: str, each: int, total: int) -> Path:
    """The test kernel's files: the source's data files (the instructor's own)."""
    if assignment not in _STAGED:
        files, _ = safefiles.regular_files(root / "source" / assignment, each, total,
                                           skip=lambda rel: rel.endswith(".ipynb"))
        dest = Path(tempfile.mkdtemp(prefix="cg-tests-", dir="/tmp"))
        shutil.rmtree(dest)
        safefiles.write_tree(dest, files)
        _STAGED[assignment] = dest
    return _STAGED[assignment]


def _cleanup() -> None:
    testkernel.close_all()
    for folder in _STAGED.values():
        shutil.rmtree(folder, ignore_errors=True)


class _Clock:
    """Seconds per step, for the report and the benchmark's breakdown."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


def _run_nbgrader(converter: str, config) -> tuple[bool, str]:
    """Run one nbgrader converter for one student; retry when SQLite stays locked."""
    import nbgrader.converters as converters
    from nbgrader.coursedir import CourseDirectory

    for attempt in range(DB_RETRIES):
        buffer = io.StringIO()
        app = getattr(converters, converter)(coursedir=CourseDirectory(config=config), config=config)
        handler = logging.StreamHandler(buffer)
        handler.setLevel(logging.WARNING)
        app.log.addHandler(handler)
        app.log.propagate = False
        app.force = True
        if hasattr(app, "create_student"):
            app.create_student = True
        try:
            app.start()
            return True, buffer.getvalue()
        except Exception as exc:
            log = buffer.getvalue() + f"\n{type(exc).__name__}: {exc}"
            if "database is locked" not in log or attempt == DB_RETRIES - 1:
                return False, log
            time.sleep(1 + attempt)
        finally:
            app.log.removeHandler(handler)
    return False, "unreachable"


def _scores(config, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(config.CourseDirectory.db_url) as gb:
        submission = gb.find_submission(assignment, student)
        return float(submission.score), float(submission.max_score)


def _tail(log: str, lines: int = 3) -> str:
    kept = [line for line in log.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:500]
