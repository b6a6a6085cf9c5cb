"""What travels between the coordinator and a grading worker: one submission as bytes,
and what became of it.

The coordinator (``autograder.coordinator.grade``) reads the course folder and is the only one that
writes it and the gradebook. A worker (``autograder.worker.worker``), on this machine or on a
Dask cluster's, needs no shared filesystem: a ``Job`` carries the submission's files and
what the worker needs of the course (its nbgrader_config.py, the source folder, the due
date; the worker makes the release from the source, as CI proves the committed one is
made), and a ``Result`` carries back the autograded
notebooks, the feedback pages and the outcome. Both are plain dataclasses of bytes and
text, so any transport (a process pool, Dask) can carry them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# Files nbgrader writes beside a submission, never a student's: an uploaded
# submission_secret.txt would choose the name its feedback page is published under (a
# classmate's, attack 19); neither counts against a limit of the student's (an import of
# the most files a submission may hold, then its timestamp.txt, was one too many to grade:
# attack 39), and the student's kernel gets neither.
NBGRADER_FILES = ("timestamp.txt", "submission_secret.txt")


@dataclass(frozen=True)
class CourseFiles:
    """What a worker needs of the course to grade one assignment."""

    assignment: str
    config: str  # the course's nbgrader_config.py
    source: dict[str, bytes]  # source/<assignment>/, relative path -> bytes
    duedate: str | None = None  # the assignment's due date in the gradebook, ISO
    schema: str | None = None  # the gradebook's alembic version (see worker._prepared)
    # The course's own modules that its config names (a late-penalty plugin beside
    # nbgrader_config.py, which nbgrader imports from the course folder): path -> bytes
    modules: dict[str, bytes] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Equal for equal contents: a worker prepares each course once."""
        h = hashlib.sha256()
        for part in (self.assignment, self.config, self.duedate or "", self.schema or ""):
            h.update(part.encode() + b"\0")
        for files in (self.source, self.modules):
            for name in sorted(files):
                h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
            h.update(b"\1")
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class Job:
    student: str
    digest: str  # of the submission's files, for the ledger
    files: dict[str, bytes]  # submitted/<student>/<assignment>/, relative path -> bytes
    course: CourseFiles
    sandbox: bool = True
    gpu: bool = False
    notes: tuple = ()  # what the coordinator changed, for the outcome's details


@dataclass
class Result:
    outcome: dict  # fates.Outcome.as_dict()
    autograded: dict[str, bytes] = field(default_factory=dict)  # autograded/<student>/<a>/
    feedback: dict[str, bytes] = field(default_factory=dict)  # feedback/<student>/<a>/
    timestamp: str | None = None  # the submission's timestamp.txt, if any
    secret: str | None = None  # its submission_secret.txt (nbgrader submit's), if any
