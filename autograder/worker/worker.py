"""Grade one submission, start to finish, in a worker: a process of the local pool or of a
Dask cluster's worker, on any machine with the course's environment and bubblewrap.

A worker shares no filesystem with the course. From a ``Job`` (``autograder.job``) it
makes a private course folder: the course's config and source, prepared once per worker
with nbgrader's own generate_assignment into a private SQLite gradebook, and then, per
job, a copy with the submission in it. There nbgrader's own autograde does the work,
with its Execute swapped for ``autograder.worker.execute.TwoKernelExecute`` (answer cells in a
sandboxed student kernel, test cells in a sandboxed test kernel forked for this submission), and
nbgrader's generate_feedback makes the page. The ``Result`` carries back the autograded
notebooks, the feedback and the outcome; only the coordinator writes the course and its
gradebook. The host side never reads a file a kernel could have written: both kernels
work in their own tmpfs. Nothing in here raises: every failure becomes the submission's
fate, and the batch goes on.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import io
import json
import logging
import os
import pwd
import re
import shutil
import signal
import stat
import sys
import threading
import time
from pathlib import Path

from autograder import course_modules, fates, logs, stalls
from autograder.config import file_limits, grading_config, load_course_config
from autograder.job import NBGRADER_FILES, CourseFiles, Job, Result
from autograder.sandbox import safefiles
from autograder.sandbox.bubblewrap import Sandbox, gpu_devices, unprivileged
from autograder.sandbox.manager import die_with_parent
from autograder.worker import (
    execute,
    feedback,
    gradebooks,
    ignore_globs,
    limited_child,
    nbgrader_threads,
    plain_feedback,
    student_kernels,
    tmpdirs,
    trusted_kernel,
)

log = logging.getLogger(__name__)

# The test kernel of slot N runs as uid_base + TEST_UID_OFFSET + N: never the uid of a
# student kernel, so it counts against no student's process limit.
TEST_UID_OFFSET = 1000
SLOTS_DIR = Path("/tmp/course-grade-slots")  # <this>-<uid>: only where /run cannot serve
ROOTS_SLOTS_DIR = Path("/run/course-grade-slots")
MAX_SLOTS = 512
_SLOTS: dict = {}  # thread ident -> that grading thread's slot
_PREPARED: dict[str, Path] = {}  # CourseFiles.key -> this worker's prepared course folder
_PREPARING = threading.Lock()
_SCRATCH: dict = {}  # thread ident -> that thread's folder for one job at a time


def init_worker(course_files: CourseFiles | None = None) -> None:
    """Pool initializer: die with the coordinator; prepare the course before the first
    job. Never raises (a pool whose initializer fails is broken for good): a course that
    cannot be prepared is each job's fate instead."""
    die_with_parent()  # the coordinator, or the fork server that ends with it
    # Ctrl-C is the coordinator's to handle (it says what was kept, then ends the workers).
    # A handler, not SIG_IGN, which the kernels this process starts would inherit.
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked while it started
    logs.configure_from_env()
    if course_files is not None:
        with contextlib.suppress(Exception):
            _prepared(course_files)


def grade_job(job: Job) -> Result:
    """Grade one submission; whatever happens, return its Result."""
    start = time.monotonic()
    scratch = _scratch()
    result = Result({})
    log.debug("grading %s (%s)", job.student, job.course.assignment)
    try:
        with stalls.working_on(tmpdirs.run_folder(), job.student):
            outcome = _grade(job, scratch, result)
    except (Exception, asyncio.CancelledError) as exc:  # the grader's own: never the batch's end
        # (CancelledError: a kernel's task cancelled under it, as Ctrl-C does; it is no
        # Exception, and would reach the coordinator as one it cannot read.)
        log.exception("the grader failed on %s", job.student)
        outcome = fates.Outcome(job.student, fates.ERROR, details=[f"{type(exc).__name__}: {exc}"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    outcome.digest = job.digest
    outcome.details = list(job.notes) + outcome.details
    outcome.seconds = round(time.monotonic() - start, 2)
    result.outcome = outcome.as_dict()
    result.timestamp = nbgrader_text(job.files.get("timestamp.txt"))
    result.secret = nbgrader_text(job.files.get("submission_secret.txt"))
    return result


def nbgrader_text(raw: bytes | None) -> str | None:
    """A file nbgrader wrote beside a submission, stripped as the coordinator strips the
    secrets it reads (``SecretHolders``): of ASCII whitespace only. ``str.strip`` took
    Unicode's too, so a classmate's secret with ``\\x1c`` after it was that secret here and
    no secret there (attack 28, a04)."""
    return raw.strip().decode(errors="replace") if raw else None


def _scratch() -> Path:
    """An empty folder for one job: the same path for each job of this worker thread (so
    its private gradebook's URL, and the SQL compiled for it, stay), a new one if the last
    could not be emptied. Per thread: a Dask worker with several threads runs several
    jobs at once, and two submissions never share a folder."""
    folder = _SCRATCH.get(threading.get_ident())
    try:
        folder.mkdir(mode=0o700)  # fails if anything is there, a link included
    except (AttributeError, OSError):
        folder = tmpdirs.make("cg-")
        _SCRATCH[threading.get_ident()] = folder
    folder.chmod(0o711)  # the kernels' uids pass through to their files; no one lists it
    return folder


def _grade(job: Job, scratch: Path, result: Result) -> fates.Outcome:
    clock = execute.Clock()
    assignment = job.course.assignment
    course = scratch / "course"
    shutil.copytree(_prepared(job.course), course, symlinks=True)
    safefiles.write_tree(
        course / "submitted" / job.student / assignment, job.files, mode=safefiles.PRIVATE
    )
    config = _config(course, job, scratch)
    clock.lap("preparing")
    for attempt in range(2):
        record = execute.RunRecord()
        config.TwoKernelExecute.record = record
        ok, log = _run_nbgrader("Autograde", config)
        events = record.get("events", [])
        # A template that served before must not cost a student a point when a problem
        # came up: once more on a fresh one.
        if (
            attempt == 0
            and record.get("reused")
            and any(e.kind is fates.Kind.NEEDS_REVIEW for e in events)
        ):
            trusted_kernel.close(
                config.TwoKernelExecute.test_files,
                config.TwoKernelExecute.test_uid,
                config.TwoKernelExecute.test_slot,
            )
            continue
        break
    clock.lap("autograde")
    # Where autograde's time went: the two kernels' steps, and nbgrader's own
    # (sanitize, restore the tests, save the grades, write the notebook).
    steps = record.get("seconds", {})
    if steps:
        sequential = sum(v for k, v in steps.items() if k != execute.TEST_TEMPLATE_START)
        clock["nbgrader's own steps"] = round(clock.pop("autograde") - sequential, 3)
        clock.update(steps)
    if not ok:
        return fates.Outcome(
            job.student,
            fates.ERROR,
            details=["nbgrader autograde failed: " + _tail(log)],
            phases=dict(clock),
        )
    fate, details = fates.decide(events)
    built = feedback_in_child(config)
    clock.lap("feedback")
    # Only the notebooks and their feedback pages come back: nbgrader also copies the
    # submission's other files there, and a student's evil.html beside the feedback page
    # would open with the Jupyter server's origin.
    big = 1 << 40  # nbgrader wrote these here, from the kernels' messages: no bound needed
    graded = safefiles.regular_files(course / "autograded" / job.student / assignment, big, big)[0]
    result.autograded = {n: d for n, d in graded.items() if n.endswith(".ipynb") and "/" not in n}
    folder = course / "feedback" / job.student / assignment
    if built.ok:
        pages = safefiles.regular_files(folder, big, big)[0] if folder.is_dir() else {}
    else:
        details.append(feedback_failed(built))
        pages = plain_pages(config, job.student, result.autograded, built)
    result.feedback = {
        n: d
        for n, d in pages.items()
        if n.endswith(".html") and n[:-5] + ".ipynb" in result.autograded
    }
    score, max_score = _scores(config, assignment, job.student)
    return fates.Outcome(job.student, fate, score, max_score, details, phases=dict(clock))


# A feedback page's own limits. An honest page of the course's units takes about 0.1 s of
# CPU in its child (benchmarks/bench_grading.py, "feedback"); these are a backstop that
# bounds every slow path of nbgrader, nbconvert and bleach on a student's notebook.
FEEDBACK_LIMITS = limited_child.Limits(cpu_seconds=10, memory=1 << 30, wall_seconds=30)


def feedback_in_child(config) -> limited_child.Ended:
    """nbgrader's generate_feedback for the config's student, in a child of its own with
    ``FEEDBACK_LIMITS``: a page that costs more is never made, and costs no more."""
    return limited_child.run(lambda: _run_nbgrader("GenerateFeedback", config), FEEDBACK_LIMITS)


def feedback_failed(built: limited_child.Ended) -> str:
    """The report's line for a page that was not made."""
    if not built.stopped:
        return "feedback failed: " + (_tail(built.said) or built.why)
    return f"feedback: a plain page of scores only, since the full page was stopped: {built.why}"


def plain_pages(config, student: str, notebooks, built: limited_child.Ended) -> dict[str, bytes]:
    """A plain page (``plain_feedback``) for each autograded notebook, in place of a page
    that was not made; the student reads why, without the grader's log. A notebook the
    gradebook does not know gets none (the report says the page failed)."""
    why = built.why if built.stopped else "the page maker failed"
    pages = {}
    for name in notebooks:
        notebook = name[: -len(".ipynb")]
        try:
            page = plain_feedback.page(
                config.CourseDirectory.db_url,
                config.CourseDirectory.assignment_id,
                student,
                notebook,
                why,
            )
        except Exception:
            log.exception("no plain feedback page for %s's %s", student, notebook)
            continue
        pages[notebook + ".html"] = page.encode()
    return pages


def _prepared(course_files: CourseFiles) -> Path:
    """This worker's course folder for an assignment: config, source, release and a
    private gradebook with the assignment in it, made once with nbgrader's own
    generate_assignment."""
    key = course_files.key
    with _PREPARING:  # two threads of one worker prepare a course once, not side by side
        if key not in _PREPARED:
            _PREPARED[key] = _prepare(course_files)
        return _PREPARED[key]


def _prepare(course_files: CourseFiles) -> Path:
    gradebooks.share_engines()
    gradebooks.share_validators()
    nbgrader_threads.install()
    ignore_globs.install()
    folder = tmpdirs.make("cg-course-")
    folder.chmod(0o711)  # the test kernel's uid passes through to test-files; no one lists it
    atexit.register(shutil.rmtree, folder, True)
    assignment = course_files.assignment
    (folder / "nbgrader_config.py").write_text(course_files.config)
    if course_files.modules:  # the course's own, beside its config, as nbgrader finds them
        safefiles.write_tree(folder, course_files.modules, mode=safefiles.PRIVATE)
        folder.chmod(0o711)  # (write_tree made it 0700)
        course_modules.importable(folder)
    safefiles.write_tree(
        folder / "source" / assignment, course_files.source, mode=safefiles.PRIVATE
    )
    config = _private(load_course_config(folder), folder)
    _stamp_gradebook(folder / "gradebook.db", course_files.schema)
    config.CourseDirectory.assignment_id = assignment
    ok, log = _run_nbgrader("GenerateAssignment", config)
    if not ok:
        raise RuntimeError("nbgrader generate_assignment failed on this worker: " + _tail(log))
    if course_files.duedate:
        from nbgrader.api import Gradebook
        from nbgrader.utils import parse_utc

        with Gradebook(config.CourseDirectory.db_url) as gb:
            gb.update_or_create_assignment(assignment, duedate=parse_utc(course_files.duedate))
    files = {
        name: data for name, data in course_files.source.items() if not name.endswith(".ipynb")
    }
    safefiles.write_tree(folder / "test-files", files)  # the test kernel's: the source's data
    _warm_feedback(folder, assignment)
    return folder


def _warm_feedback(folder: Path, assignment: str) -> None:
    """Fill this worker's page caches from the instructor's notebooks (``feedback.warm``),
    which every page's child then starts with. A course whose page cannot be made this way
    is graded all the same, its pages made from cold caches."""
    config = _private(grading_config(folder), folder)
    config.CourseDirectory.assignment_id = assignment
    for source in sorted((folder / "source" / assignment).glob("*.ipynb")):
        try:
            seconds = feedback.warm(config, source)
            log.debug("feedback caches warmed from %s in %.2f CPU s", source.name, seconds)
        except Exception:
            log.exception("feedback caches not warmed from %s", source.name)


def _stamp_gradebook(path: Path, schema: str | None) -> None:
    """Give a new private gradebook the course gradebook's schema version, as nbgrader
    would: nbgrader asks ``alembic heads`` in a subprocess for it, about 3 s of CPU per
    worker. This gradebook is thrown away with the worker and never migrated."""
    if schema:
        import sqlite3

        with contextlib.closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            db.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (schema,))
        return
    # nbgrader runs `alembic` by name when it makes a gradebook: this environment's.
    tools = str(Path(sys.executable).parent)
    if tools not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = tools + os.pathsep + os.environ.get("PATH", "")


def _private(config, folder: Path):
    """A worker writes only its own gradebook, whatever the course's says (PostgreSQL...)."""
    config.CourseDirectory.root = str(folder)
    config.CourseDirectory.db_url = f"sqlite:///{folder}/gradebook.db"
    gradebooks.scratch(config.CourseDirectory.db_url)
    return config


def _config(course: Path, job: Job, scratch: Path):
    assignment = job.course.assignment
    config = _private(grading_config(course), course)
    config.CourseDirectory.assignment_id = assignment
    config.CourseDirectory.student_id = job.student
    each, total = file_limits(config)
    slot = _slot(Sandbox(config=config).uid_base)
    preload_for(config, assignment)
    config.SandboxMixin.use_bwrap = job.sandbox
    config.SandboxMixin.uid = slot["uid"] if job.sandbox else -1
    config.SandboxMixin.runtime_root = str(scratch)
    config.SandboxMixin.staging = str(_student_files(course, job, scratch, each, total))
    sources = sorted((course / "source" / assignment).glob("*.ipynb"))
    config.TwoKernelExecute.source_notebook = str(sources[0])
    config.TwoKernelExecute.test_files = str(_test_files(job.course))
    config.TwoKernelExecute.test_uid = slot["test_uid"] if job.sandbox else -1
    config.TwoKernelExecute.test_slot = slot["index"]
    config.SandboxMixin.slot = slot["index"]
    if job.gpu:
        gpu_profile(config, slot["index"])
    return config


def preload_for(config, assignment: str) -> None:
    """The kernels' templates of this assignment import what the instructor's
    ``Sandbox.template_preload`` names for it (nothing more for another assignment)."""
    config.SandboxMixin.preload = list(Sandbox(config=config).template_preload.get(assignment, []))


def gpu_profile(config, slot: int) -> None:
    """Grading on a GPU: the /dev/nvidia* devices in the sandbox, no address-space limit
    (CUDA reserves huge virtual ranges), and one GPU per worker slot, unless the worker
    was started with CUDA_VISIBLE_DEVICES already (dask-cuda, a job scheduler)."""
    config.Sandbox.address_space_limit = False
    config.Sandbox.devices = list(
        dict.fromkeys(list(config.Sandbox.get("devices", [])) + gpu_devices())
    )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        count = len([d for d in gpu_devices() if d[len("/dev/nvidia") :].isdigit()])
        visible = str(slot % count) if count else ""
    config.SandboxMixin.extra_env = [f"CUDA_VISIBLE_DEVICES={visible}"]


def _student_files(course: Path, job: Job, scratch: Path, each: int, total: int) -> Path:
    """The student's kernel's files: the submission's own, then the release's data over
    them, never a notebook (the autograded one holds the hidden tests)."""
    # Nor nbgrader's timestamp, nor the exchange's secret: it names the student's feedback
    # file in the exchange, and is nobody's to read (the kernel has no use for it).
    not_notebook = lambda rel: rel.endswith(".ipynb") or rel in NBGRADER_FILES  # noqa: E731
    files = {name: data for name, data in job.files.items() if not not_notebook(name)}
    release = course / "release" / job.course.assignment
    if release.is_dir():
        files.update(safefiles.regular_files(release, each, total, skip=not_notebook)[0])
    dest = scratch / "student-files"
    safefiles.write_tree(dest, files)
    return dest


def _test_files(course_files: CourseFiles) -> Path:
    """The test kernel's files: the source's data files (the instructor's own), written
    once with the prepared course."""
    return _prepared(course_files) / "test-files"


def _slot(uid_base: int) -> dict:
    """This grading thread's slot: a number no other grading thread of this user on this
    machine holds (a lock kept for the process's life), whatever started it. Per thread:
    a Dask worker with several threads grades several submissions at once, and each gets
    its own kernels' uids, its own test-kernel template and its own GPU."""
    me = threading.get_ident()
    if me in _SLOTS:
        return _SLOTS[me]
    folder = slots_folder()
    for index in range(MAX_SLOTS):
        try:
            fd = os.open(folder / f"{index}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        slot = {"index": index, "fd": fd}
        if (
            unprivileged()
        ):  # no uid to give: kernels get user namespaces (autograder.sandbox.bubblewrap)
            slot.update(uid=-1, test_uid=-1)
        else:
            slot.update(uid=uid_base + index, test_uid=uid_base + TEST_UID_OFFSET + index)
        _SLOTS[me] = slot
        return slot
    raise RuntimeError(f"more than {MAX_SLOTS} grading threads on this machine")


def slots_folder() -> Path:
    """The folder of this user's slot locks, one for every grading process of theirs on
    this machine. Threat: anyone with an account here can make a folder in /tmp first, with
    that name, and hold every lock in it or plant links there (attack 19: every submission
    became ``error``, on every run). So root's is in /run, where only root makes folders;
    another user's is in their own runtime folder (/run/user/<uid>) where there is one, else
    in /tmp; and it is used only if it is a real folder of this user's that no one else may
    write in. Raises ``SlotsUnusable`` with what to do, before anything is graded."""
    uid = os.geteuid()
    runtime = Path(f"/run/user/{uid}")
    if uid == 0:
        folders = [ROOTS_SLOTS_DIR, Path(f"{SLOTS_DIR}-{uid}")]  # /tmp: a /run we cannot write
    elif _users_alone(runtime, uid):
        folders = [runtime / "course-grade-slots"]
    else:
        folders = [Path(f"{SLOTS_DIR}-{uid}")]
    for folder in folders:
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        if _users_alone(folder, uid):
            return folder
        raise SlotsUnusable(
            f"{folder} (where grading processes take their slots) is not a folder of "
            f"{_user(uid)}'s alone: someone else made it, or it is a link, or others may "
            f"write in it. Nothing was graded. Remove it (as root: rm -rf {folder}) and "
            "grade again."
        )
    raise SlotsUnusable(f"no folder for the grading slots could be made in {folders[-1].parent}")


class SlotsUnusable(RuntimeError):
    pass


def _users_alone(folder: Path, uid: int) -> bool:
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _run_nbgrader(converter: str, config) -> tuple[bool, str]:
    """Run one nbgrader converter in this process; return whether it worked, and its log."""
    import nbgrader.converters as converters
    from nbgrader.coursedir import CourseDirectory

    buffer = io.StringIO()
    app = getattr(converters, converter)(coursedir=CourseDirectory(config=config), config=config)
    # A logger of this thread's own: two jobs in one process never share one's lines.
    # (its lines reach course-grade --debug and --log-file through the autograder logger)
    app.log = logging.getLogger(f"{logs.NBGRADER}.{converter}.t{threading.get_ident()}")
    handler = logging.StreamHandler(buffer)
    handler.setLevel(logging.WARNING)
    app.log.addHandler(handler)
    released = ReleasedChecksums(config)
    app.log.addFilter(released)
    app.force = True
    if hasattr(app, "create_student"):
        app.create_student = True
    try:
        app.start()
        return True, buffer.getvalue()
    except Exception as exc:
        return False, buffer.getvalue() + f"\n{type(exc).__name__}: {exc}"
    finally:
        app.log.removeHandler(handler)
        app.log.removeFilter(released)


class ReleasedChecksums(logging.Filter):
    """Drops nbgrader's false alarm "Attribute 'checksum' for cell ... has changed!" for a
    test cell exactly as released: the gradebook keeps the checksum of the cell with its
    hidden tests, the release the one without (jupyter/nbgrader#1961). A cell a student
    did change still warns."""

    WARNING = re.compile(r"Attribute 'checksum' for cell (\S+) has changed! .*got: (\w+)\)")

    def __init__(self, config):
        super().__init__()
        course = Path(config.CourseDirectory.root or ".")
        self.released: dict[str, str] = {}
        for notebook in (course / "release" / config.CourseDirectory.assignment_id).glob("*.ipynb"):
            with contextlib.suppress(OSError, ValueError):
                for cell in json.loads(notebook.read_text()).get("cells", []):
                    grading = cell.get("metadata", {}).get("nbgrader", {})
                    if grading.get("grade_id") and grading.get("checksum"):
                        self.released[grading["grade_id"]] = grading["checksum"]

    def filter(self, record: logging.LogRecord) -> bool:
        found = self.WARNING.match(record.getMessage())
        return not (found and self.released.get(found[1]) == found[2])


def _scores(config, assignment: str, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(config.CourseDirectory.db_url) as gb:
        submission = gb.find_submission(assignment, student)
        return float(submission.score), float(submission.max_score)


_BOILERPLATE = (
    "Please see the above traceback",
    "nbgrader.nbgraderformat",
    "[NbGraderAPI |",
    "Traceback (most recent call last)",
)


def _tail(log: str, lines: int = 3) -> str:
    """What a failed nbgrader step said: the lines of its last error, not its closing
    boilerplate ("Please see the above traceback")."""
    kept = [
        line.strip()
        for line in log.strip().splitlines()
        if line.strip() and not any(b in line for b in _BOILERPLATE)
    ]
    errors = [line for line in kept if "Error" in line or "Exception" in line]
    chosen = errors[-lines:] if errors else kept[-lines:]
    return " | ".join(chosen)[:800]


atexit.register(trusted_kernel.close_all)
atexit.register(student_kernels.close_all)
