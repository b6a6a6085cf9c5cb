"""Grade one submission, start to finish, in a worker process of the pool.

nbgrader's own autograde does the work (sanitize, restore test cells, run, save grades),
with its Execute swapped for the sandboxed one. Then, while this worker still owns its
sandbox uid, the integrity review runs (when ``autograder.integrity`` exists) and its
revoked test cells are zeroed in the gradebook; then feedback is generated. The review's
clean-room kernel is the worker's own and stays warm across its submissions. Nothing in
here raises: every failure becomes the submission's fate, and the batch goes on.
"""
from __future__ import annotations

import atexit
import ctypes
import functools
import importlib.util
import io
import logging
import shutil
import signal
import tempfile
import time
from pathlib import Path

from autograder import fates
from autograder.config import grading_config
from autograder.context import GradingContext, Review
from autograder.kernel import launch_kernel, read_events

DB_RETRIES = 3
# The clean-room kernel of slot N runs as uid_base + CLEAN_ROOM_UID_OFFSET + N: never the
# uid of a student kernel, so it counts against no student's process limit.
CLEAN_ROOM_UID_OFFSET = 1000
_SLOT = {"uid": -1, "clean_room_uid": -1}
_ROOMS: dict = {}  # (course root, sandboxed) -> this worker's warm CleanRoom


def init_worker(slots, uid_base: int) -> None:
    """Pool initializer: die with the parent, and take a slot (its own kernel uid)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    slot = slots.get()
    if uid_base >= 0:  # -1: not root, no uid to give (autograder.sandbox)
        _SLOT["uid"] = uid_base + slot
        _SLOT["clean_room_uid"] = uid_base + CLEAN_ROOM_UID_OFFSET + slot


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


def _config(root: Path, assignment: str, student: str, scratch: Path, sandbox: bool):
    config = grading_config(root)
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = student
    config.SandboxMixin.use_bwrap = sandbox
    config.SandboxMixin.uid = _SLOT["uid"] if sandbox else -1
    config.SandboxMixin.runtime_root = str(scratch)
    config.SandboxMixin.audit_log = str(scratch / "audit.log")
    config.SandboxMixin.events_file = str(scratch / "events.jsonl")
    config.SandboxedExecute.events_file = str(scratch / "events.jsonl")
    return config


def _grade(root: Path, assignment: str, student: str, scratch: Path, sandbox: bool):
    config = _config(root, assignment, student, scratch, sandbox)
    clock = _Clock()
    ok, log = _run_nbgrader("Autograde", config)
    clock.lap("autograde")
    if not ok:
        return fates.Outcome(student, fates.ERROR, details=["nbgrader autograde failed: " + _tail(log)],
                             phases=clock.laps)
    work_dir = root / "autograded" / student / assignment
    review = _review(root, assignment, student, work_dir, scratch, config)
    clock.lap("review")
    zeroed = _zero_cells(config, assignment, student, review.zero_cells)
    events = read_events(scratch / "events.jsonl")
    fate, details = fates.decide(events, review.flags, _has_memory_error(work_dir))
    clock.lap("verdict")
    feedback_ok, feedback_log = _run_nbgrader("GenerateFeedback", config)
    clock.lap("feedback")
    if not feedback_ok:
        details.append("feedback failed: " + _tail(feedback_log))
    score, max_score = _scores(config, assignment, student)
    return fates.Outcome(student, fate, score, max_score, details, review.flags, sorted(zeroed),
                         phases=clock.laps)


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


def _review(root, assignment, student, work_dir, scratch, config) -> Review:
    if importlib.util.find_spec("autograder.integrity") is None:
        return Review()
    from autograder import integrity

    notebooks = sorted(p.name for p in (root / "source" / assignment).glob("*.ipynb"))
    name = notebooks[0] if notebooks else f"{assignment}.ipynb"
    review_scratch = scratch / "review"
    review_scratch.mkdir()
    ctx = GradingContext(
        student_id=student, assignment_id=assignment, course_root=root, work_dir=work_dir,
        submitted_nb=root / "submitted" / student / assignment / name,
        autograded_nb=work_dir / name, source_nb=root / "source" / assignment / name,
        audit_log=scratch / "audit.log",
        launch_kernel=functools.partial(launch_kernel, config=config),
        scratch_dir=review_scratch,
        cell_timeout=int(config.Execute.get("timeout", 30) or 30),
        clean_room=_clean_room(root, config.SandboxMixin.use_bwrap),
    )
    try:
        return integrity.review(ctx)
    except Exception as exc:
        return Review(flags=[f"the integrity review could not finish ({type(exc).__name__}: "
                             f"{exc}); check this submission by hand"])


def _clean_room(root: Path, sandbox: bool):
    """This worker's warm clean room: its own folder, uid and kernel, for the whole run."""
    from autograder.cleanroom import CleanRoom

    key = (str(root), sandbox)
    if key not in _ROOMS:
        folder = Path(tempfile.mkdtemp(prefix="cg-room-", dir="/tmp"))
        folder.chmod(0o755)
        config = grading_config(root)
        config.SandboxMixin.use_bwrap = sandbox
        config.SandboxMixin.uid = _SLOT["clean_room_uid"] if sandbox else -1
        config.SandboxMixin.runtime_root = str(folder)
        room = CleanRoom(functools.partial(launch_kernel, config=config), folder)
        _ROOMS[key] = room
        atexit.register(_close_room, room)
    return _ROOMS[key]


def _close_room(room) -> None:
    room.close()
    shutil.rmtree(room.folder, ignore_errors=True)


def _zero_cells(config, assignment: str, student: str, grade_ids: set[str]) -> set[str]:
    if not grade_ids:
        return set()
    from nbgrader.api import Gradebook, MissingEntry

    zeroed = set()
    with Gradebook(config.CourseDirectory.db_url) as gb:
        submission = gb.find_submission(assignment, student)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                if grade.name in grade_ids and (grade.auto_score or 0) > 0:
                    grade.auto_score = 0
                    zeroed.add(grade.name)
        try:
            gb.db.commit()
        except MissingEntry:
            pass
    return zeroed


def _scores(config, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(config.CourseDirectory.db_url) as gb:
        submission = gb.find_submission(assignment, student)
        return float(submission.score), float(submission.max_score)


def _has_memory_error(work_dir: Path) -> bool:
    import nbformat

    for path in work_dir.glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error" and out.get("ename") == "MemoryError":
                    return True
    return False


def _tail(log: str, lines: int = 3) -> str:
    kept = [line for line in log.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[:500]
