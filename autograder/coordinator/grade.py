"""Grade a class: every new or changed submission, N at once, each in its own sandboxes.

The coordinator decides what to grade (content hash against the ledger), rejects what
cannot be graded (no notebook, invalid notebook) without starting a kernel, and sends
the rest, as ``autograder.job.Job``s, to workers: a local process pool, or a Dask cluster
(``scheduler``). Both are ``concurrent.futures`` executors and both run
``autograder.worker.worker.grade_job``: there is one path for what happens to a submission.
Results come back as bytes, and only the coordinator writes the course folder and the
gradebook (nbgrader's own SaveAutoGrades, each notebook in one transaction, and
AssignLatePenalties, so SQLite never has two writers), then the ledger. A worker that dies
mid-job is replaced (by Dask, which runs the job again elsewhere; in the local pool the
jobs it held are run again, one at a time, so that only the submission that kills a
worker on its own is given up), and a result is recorded once, by digest.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from autograder import course_modules, fates, stalls
from autograder.config import exchange_config, exchange_timezone, grading_config
from autograder.coordinator import fork_server, inbox
from autograder.coordinator.ledger import Ledger
from autograder.job import CourseFiles, Job, Result
from autograder.printable import printable
from autograder.sandbox import safefiles
from autograder.sandbox.bubblewrap import Sandbox, unprivileged, unprivileged_problem
from autograder.worker import gradebooks, tmpdirs
from autograder.worker.worker import SlotsUnusable, grade_job, init_worker, slots_folder

log = logging.getLogger(__name__)

IN_FLIGHT_PER_WORKER = 3  # jobs sent ahead of results: bounds the coordinator's memory


class InstructorError(Exception):
    """Something only the instructor can fix (no gradebook entry, no bwrap...)."""


# nbgrader as this environment has it: a root shell's PATH may have none (the README
# writes .venv/bin/nbgrader); as the course's owner, so that nothing in it is root's.
NBGRADER = str(Path(sys.executable).parent / "nbgrader")


class NotInGradebook(InstructorError):
    """Units the gradebook lacks; said together, so that one command mends them all."""

    def __init__(self, course_root: Path, assignments: list[str]):
        self.course_root, self.assignments = course_root, assignments
        names = ", ".join(map(repr, assignments))
        run = " && ".join(f"{NBGRADER} generate_assignment {a} --force" for a in assignments)
        super().__init__(
            f"{'assignment' if len(assignments) == 1 else 'assignments'} {names} "
            f"{'is' if len(assignments) == 1 else 'are'} not in the gradebook: run "
            f"`{run}` in {course_root} first"
        )


def check_ready(course_root: Path, assignment: str, sandbox: bool) -> None:
    config = grading_config(course_root)
    if sandbox and Sandbox(config=config).bwrap_path() is None:
        raise InstructorError(
            f"bubblewrap ({config.Sandbox.get('bwrap', 'bwrap')}) is not installed (not on PATH "
            "nor in /usr/bin), so student code cannot be sandboxed. "
            "Install it (Debian/Ubuntu: apt-get install bubblewrap) or, only if you trust "
            "every submission, run again with --no-sandbox."
        )
    if sandbox and unprivileged():
        problem = unprivileged_problem(Sandbox(config=config).bwrap_path())
        if problem:
            raise InstructorError(
                f"cannot sandboxed-grade as an ordinary user here: {problem}. Run with "
                "sudo (each kernel then runs as its own user), or use --no-sandbox on a "
                "machine you can afford to lose."
            )
    if sandbox:  # (a grading process's slot: its kernels' uids, its test template)
        try:
            slots_folder()
        except SlotsUnusable as exc:
            raise InstructorError(str(exc)) from None
    if not inbox.expected_notebooks(course_root, assignment):
        raise InstructorError(no_such_unit(course_root, assignment))
    _check_late_plugin(course_root, config)
    from nbgrader.api import Gradebook, MissingEntry

    url = config.CourseDirectory.db_url
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :].split("?")[0]).exists():
        raise InstructorError(  # opening it would make an empty one in the course
            f"the course has no gradebook yet: run `{NBGRADER} generate_assignment {assignment}` "
            f"in {course_root} first"
        )
    with Gradebook(url) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise NotInGradebook(course_root, [assignment]) from None


def _check_late_plugin(course_root: Path, config) -> None:
    """The course's late-penalty plugin imports as nbgrader imports it (the course folder
    first on sys.path), before anything is graded: else every submission's fate was
    ``error``, one by one."""
    from traitlets.utils.importstring import import_item

    plugin = (
        config.AssignLatePenalties.get("plugin_class") if "AssignLatePenalties" in config else None
    )
    if not isinstance(plugin, str):
        return
    course_modules.importable(course_root)
    try:
        import_item(plugin)
    except Exception as exc:  # noqa: BLE001 - the instructor's module: said, nothing graded
        raise InstructorError(
            f"c.AssignLatePenalties.plugin_class = {plugin!r} cannot be imported "
            f"({type(exc).__name__}: {printable(str(exc))[:200]}): keep its module beside "
            "nbgrader_config.py, as nbgrader finds it, or install it"
        ) from None
    try:
        sent = course_modules.named(course_root, config)
    except ValueError as exc:
        raise InstructorError(str(exc)) from None
    why = course_modules.import_problem(plugin, sent)
    if why is not None:
        raise InstructorError(
            f"c.AssignLatePenalties.plugin_class = {plugin!r} imports in the course folder but "
            f"not from the files the graders get ({', '.join(sorted(sent)) or 'none'}): "
            f"{printable(why)[:200]}. Keep what it reads in a package folder beside "
            "nbgrader_config.py (the whole folder is sent), or install it"
        )


def course_units(course_root: Path) -> list[str]:
    """The units of the course: each folder of source/ with notebooks in it, by name."""
    source = course_root / "source"
    if not source.is_dir():
        return []
    return sorted(
        p.name
        for p in source.iterdir()
        if p.is_dir() and inbox.expected_notebooks(course_root, p.name)
    )


def no_such_unit(course_root: Path, assignment: str) -> str:
    """What to say of a unit name without source notebooks: the units there are, and the
    nearest name (a typo, surely)."""
    import difflib

    units = course_units(course_root)
    lowered = {unit.lower(): unit for unit in units}
    near = [lowered[n] for n in difflib.get_close_matches(assignment.lower(), lowered, n=1)]
    said = f"no source notebooks in {course_root / 'source' / assignment}"
    if near:
        said += f"; did you mean {near[0]}"
    if not (course_root / "source").is_dir():
        return (
            f"{said}{'?' if near else '.'} {course_root} has no source/ folder: is it the course folder? "
            "Run course-grade in the course folder (where nbgrader_config.py and source/ "
            "are), or give it with --course DIR."
        )
    end = "?" if near else "."
    return said + f"{end} The course's units: {', '.join(units) or 'none (source/ is empty)'}"


def recorded_outcomes(course_root: Path, assignment: str) -> list[dict]:
    """Every student's outcome as the ledger has it, without grading (--report-only)."""
    ledger = Ledger(course_root, assignment)
    outcomes = {e["student_id"]: {**e, "this_run": "unchanged"} for e in ledger.entries()}
    full = full_marks(course_root, assignment)
    for student in roster(course_root):
        outcomes.setdefault(
            student,
            _nothing_submitted(student, full),
        )
    for student, notes in ledger.notes().items():
        outcome = outcomes.setdefault(
            student,
            _nothing_submitted(student, full),
        )
        outcome["details"] = notes + [d for d in outcome["details"] if d not in notes]
    return [outcomes[s] for s in sorted(outcomes)]


def roster(course_root: Path) -> list[str]:
    from nbgrader.api import Gradebook

    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        return sorted(s.id for s in gb.students)


def course_files(course_root: Path, assignment: str) -> CourseFiles:
    """What a worker needs of the course for this assignment."""
    from nbgrader.api import Gradebook
    from sqlalchemy import text

    config = grading_config(course_root)
    source, refused = safefiles.regular_files(course_root / "source" / assignment, 1 << 30, 1 << 32)
    if refused:
        raise InstructorError(
            f"source/{assignment} holds what the grader will not read: " + "; ".join(refused[:3])
        )
    with Gradebook(config.CourseDirectory.db_url) as gb:
        duedate = gb.find_assignment(assignment).duedate
        schema = gb.db.execute(text("SELECT version_num FROM alembic_version")).scalar()
    try:
        modules = course_modules.named(course_root, config)
    except ValueError as exc:
        raise InstructorError(str(exc)) from None
    return CourseFiles(
        assignment,
        (course_root / "nbgrader_config.py").read_text(),
        source,
        duedate.isoformat() if duedate else None,
        schema,
        modules,
    )


def grade_assignment(
    course_root: Path,
    assignment: str,
    *,
    jobs: int | None = None,
    sandbox: bool = True,
    force: bool = False,
    executor=None,
    gpu: bool = False,
    on_result: Callable[[dict], None] | None = None,
    progress=None,
    students: set[str] | None = None,
) -> list[dict]:
    """Grade what needs grading; return every submission's outcome (old and new).

    ``executor``: where jobs run (a Dask client's executor); None: a local pool of ``jobs``.
    ``students``: grade only these (``force`` then grades them again); the others keep
    what the ledger says.
    """
    course_root = Path(course_root).resolve()
    gradebooks.share_engines()
    gradebooks.share_validators()
    check_ready(course_root, assignment, sandbox)
    files_of_course = course_files(course_root, assignment)
    submitted = [
        s
        for s in inbox.submitted_students(course_root, assignment)
        if students is None or s in students
    ]
    gradable = [s for s in submitted if inbox.valid_student_id(s)]
    with contextlib.ExitStack() as stack:
        if executor is None and gradable:
            executor, workers = stack.enter_context(
                local_pool(min(jobs or os.cpu_count() or 1, len(gradable)), files_of_course)
            )
        else:
            workers = _workers(executor) if executor is not None else 1
        return _grade_class(
            course_root,
            assignment,
            submitted,
            files_of_course,
            sandbox,
            force,
            gpu,
            executor,
            workers,
            on_result,
            progress,
            students,
        )


# What the grader says about itself, not the submission: graded again on the next run.
def _nothing_submitted(student: str, full: float | None) -> dict:
    """A student of the gradebook with no submission: 0 of the assignment's full marks, as
    nbgrader's export says (a blank maximum read as 0 of nothing in a spreadsheet)."""
    return fates.Outcome(student, fates.NOT_SUBMITTED, 0.0, full, ["nothing submitted"]).as_dict()


def full_marks(course_root: Path, assignment: str) -> float | None:
    """The assignment's full marks, as the gradebook has them (None if it has not the
    assignment)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        try:
            return float(gb.find_assignment(assignment).max_score)
        except MissingEntry:
            return None


def _retried(entry: dict) -> bool:
    return entry.get("fate") == fates.ERROR or (
        entry.get("fate") == fates.NEEDS_REVIEW
        and entry.get("digest")
        and any(d.startswith("test points withheld") for d in entry.get("details") or [])
    )


def _grade_class(
    course_root: Path,
    assignment: str,
    submitted: list[str],
    files_of_course: CourseFiles,
    sandbox: bool,
    force: bool,
    gpu: bool,
    executor,
    workers: int,
    on_result,
    progress,
    students: set[str] | None = None,
) -> list[dict]:
    """``students``: the only students whose gradebook rows this run may touch (--student);
    None: the whole class."""
    config = grading_config(course_root)
    zone = exchange_timezone(exchange_config(course_root))
    ledger = Ledger(course_root, assignment)
    notebooks = inbox.expected_notebooks(course_root, assignment)
    cells = inbox.source_cells(course_root, assignment)
    full = full_marks(course_root, assignment)
    to_grade: list[Job] = []
    outcomes: dict[str, dict] = {}
    pending = ledger.to_regrade()  # what an interrupted forced run had still to grade
    enrolled = set(roster(course_root))
    for student in submitted:
        if not inbox.valid_student_id(student):
            # Never graded (paths and exports take plain ids only), never silent: its
            # student, who may be on the roster, gets no score and the reason, never the
            # 0 of "not submitted" (outside review 71: a full-marks submission of
            # "ada@uni.edu" went to the LMS as 0).
            if students is None and not inbox.attributable(student, enrolled):
                log.error(
                    "%s: a folder of submitted/ that is no student's id; not graded",
                    printable(student)[:80],
                )
            elif students is None:
                outcome = fates.Outcome(
                    student, fates.NEEDS_REVIEW, details=[inbox.NOT_A_PLAIN_ID]
                ).as_dict()
                try:
                    ledger.put(outcome)  # what every export reads: no grade, not a 0
                except OSError as exc:  # a name too long for its ledger file's
                    log.error("%s: not recorded: %s", printable(student)[:80], exc)
                outcomes[student] = {**outcome, "this_run": "rejected"}
            continue
        files, refused = inbox.read_submission(
            course_root / "submitted" / student / assignment, config
        )
        if "timestamp.txt" in files:  # nbgrader's date in the course's zone, if it is one
            text = files["timestamp.txt"].decode("utf-8", errors="replace")
            stamp = inbox.utc_stamp(text, zone)
            if stamp != text:
                files["timestamp.txt"] = stamp.encode()
        digest = inbox.digest(files, refused)
        done = ledger.get(student)
        again = force or student in pending or _retried(done or {})
        if done and done.get("digest") == digest and not again:
            outcomes[student] = {**done, "this_run": "unchanged"}
            continue
        try:
            rejected = inbox.problem(files, refused, notebooks, cells)
            if not rejected:
                files, notes = inbox.ordinary_cells(files, notebooks, cells)
        except Exception as exc:  # noqa: BLE001 - one submission's, never the class's end
            # No traceback: its last line would quote the student's data unescaped.
            why = printable(f"{type(exc).__name__}: {exc}")[:200]
            log.error("%s: the grader could not read the submission: %s", student, why)
            rejected = fates.ERROR, f"the grader could not read the submission ({why})"
        if rejected:
            fate, message = rejected
            outcome = fates.Outcome(student, fate, 0.0, None, [message], digest=digest).as_dict()
            dated = None if inbox.timestamp_problem(files) else files.get("timestamp.txt")
            _zero_submission(
                course_root, assignment, student, dated and dated.decode(errors="replace").strip()
            )
            ledger.put(outcome)
            pending.discard(student)
            outcomes[student] = {**outcome, "this_run": "rejected"}
            continue
        to_grade.append(Job(student, digest, files, files_of_course, sandbox, gpu, tuple(notes)))
    waiting = {job.student for job in to_grade}
    if force:  # listed before any is graded: an interruption leaves the rest to the next run
        pending |= waiting
    ledger.set_to_regrade(pending)
    for entry in ledger.entries():
        student = entry["student_id"]
        if student in outcomes or student in waiting:
            continue
        if students is not None and student not in students:
            # Not chosen (--student): what the ledger and the gradebook say stays.
            outcomes[student] = {**entry, "this_run": "unchanged"}
            continue
        outcomes[student] = {**entry, "this_run": "import"}  # no submitted folder to grade
        _zero_submission(course_root, assignment, student)
    for student in sorted(enrolled):
        if student not in outcomes and student not in waiting:
            outcomes[student] = _nothing_submitted(student, full)

    if progress is not None:
        progress.reset(total=len(to_grade))
    holders = SecretHolders(course_root, assignment)  # read once, at the first record
    watch = _stall_watch(executor, config)
    for result in _complete(executor, to_grade, workers, watch) if to_grade else ():
        outcome = record(course_root, assignment, result, holders)
        ledger.put(outcome)
        for other, note in holders.renamed.items():
            _note_renamed_page(ledger, outcomes, other, note)
        holders.renamed.clear()
        if outcome["student_id"] in pending:
            pending.discard(outcome["student_id"])
            ledger.set_to_regrade(pending)
        # the grader's own failure is no grade: said apart, and graded again next run
        done_now = "failed" if outcome["fate"] == fates.ERROR else "graded"
        outcomes[outcome["student_id"]] = {**outcome, "this_run": done_now}
        if on_result:
            on_result(outcome)
        if progress is not None:
            progress.update(1)
    for student, notes in ledger.notes().items():  # e.g. a folder forged in another's name
        outcome = outcomes.setdefault(
            student,
            _nothing_submitted(student, full),
        )
        outcome["details"] = notes + [d for d in outcome["details"] if d not in notes]
    return [outcomes[s] for s in sorted(outcomes)]


def _note_renamed_page(ledger: Ledger, outcomes: dict, student: str, note: str) -> None:
    """Say on ``student``'s own line that another's submission renamed their page (attack
    24: the note was on the copier's line alone, and went when the copier resubmitted).
    It is kept in their ledger entry, so every report shows it until they are graded
    again, which gives the page its own name back."""
    entry = ledger.get(student)
    if entry is not None:
        if note not in entry.get("details", []):
            entry["details"] = [*entry.get("details", []), note]
            ledger.put(entry)
    else:
        log.warning("%s: %s", student, note)  # a page course-grade did not grade
    if student in outcomes and note not in outcomes[student]["details"]:
        outcomes[student]["details"] = [*outcomes[student]["details"], note]


class LocalPool:
    """A pool of grading processes on this machine that can be started again: a worker
    that dies (killed for memory, say) breaks a ``ProcessPoolExecutor`` for good, and
    with it every job in flight."""

    # Seconds a worker told to stop (Ctrl-C) has to remove its folders before it is killed.
    STOP_GRACE = 10

    def __init__(self, workers: int, files_of_course: CourseFiles):
        self.workers, self.files_of_course = max(1, workers), files_of_course
        self.killed = False
        for stale in tmpdirs.remove_stale():
            log.info("removed %s: a run of this user's that ended without removing it", stale)
        # Every worker's folders (copies of the course, submissions, kernels) are made in
        # this one folder, which goes with the pool however its workers end.
        self.run_folder = tmpdirs.new_run()
        fork_server.quiet_resource_tracker()
        self.context = fork_server.context()
        self.stop = self.context.Event()  # set: every worker cleans up and exits
        self.executor = self._start()

    def _start(self) -> ProcessPoolExecutor:
        # Started at once: each worker imports nbgrader and prepares its private course
        # while the coordinator checks the inbox (a pool starts its processes only when
        # work arrives, so each gets a no-op). Ctrl-C blocked: see fork_server.sigint_blocked.
        with fork_server.sigint_blocked():
            pool = ProcessPoolExecutor(
                self.workers,
                mp_context=self.context,
                initializer=init_pool_worker,
                initargs=(
                    self.files_of_course,
                    self.stop,
                    str(self.run_folder),
                    dict(os.environ),
                ),
            )
            for _ in range(self.workers):
                pool.submit(os.getpid)
        return pool

    def submit(self, fn, *args):
        return self.executor.submit(fn, *args)

    def restart(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.executor = self._start()

    def shutdown(self) -> None:
        if not self.killed:  # a killed pool's threads may never finish: nobody waits
            self.executor.shutdown(wait=True, cancel_futures=True)
        self.remove_run_folder()

    def remove_run_folder(self) -> None:
        shutil.rmtree(self.run_folder, ignore_errors=True)  # never follows a link inside

    def kill(self) -> None:
        """End every worker now (Ctrl-C): the jobs in flight go, what is recorded stays.
        Each worker is told to stop (``stop``) and removes its copies of the course (source,
        hidden tests, gradebook, submissions) and its kernels; one that has not within
        ``STOP_GRACE`` seconds is killed. Nothing waits on the pool's threads, which may be
        stuck writing jobs to a pipe nobody reads: the caller ends the process."""
        self.killed = True
        with contextlib.suppress(ValueError):  # a second Ctrl-C must not cut this short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        processes = list((getattr(self.executor, "_processes", None) or {}).values())
        self.stop.set()
        deadline = time.monotonic() + self.STOP_GRACE
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(max(0.0, deadline - time.monotonic()))
        for process in processes:
            with contextlib.suppress(Exception):
                if process.is_alive():
                    process.kill()
        self.executor.shutdown(wait=False, cancel_futures=True)
        # Whatever a worker could not remove (it was killed, or ended before its stop
        # thread ran) goes with the run folder.
        self.remove_run_folder()


def init_pool_worker(
    files_of_course: CourseFiles | None = None,
    stop=None,
    run_folder: str | None = None,
    environment: dict[str, str] | None = None,
) -> None:
    """A local pool's initializer: the worker's own (``init_worker``), with its files
    private, in the pool's ``run_folder``, and a thread that cleans up and ends the worker
    once ``stop`` is set. ``environment``: the coordinator's when it started the pool (a
    forked worker has the fork server's, as the coordinator's was when that started).

    A thread, not a signal handler: Python runs handlers in the main thread only, which
    may be blocked for good on a kernel that Ctrl-C killed."""
    # What the worker writes in /tmp (its copies of the course: solutions, hidden tests, a
    # gradebook, the submission, the autograded notebook) is nobody else's to read. What
    # the kernels, which run as other users, must read is written by
    # ``safefiles.write_tree`` with its own modes; they only pass through the course
    # copy's folder to their test files (the source's data, no secret).
    os.umask(0o077)
    fork_server.let_it_end_with_the_coordinator()
    if environment is not None:
        os.environ.clear()
        os.environ.update(environment)
    if run_folder is not None:
        tmpdirs.use(run_folder)
    init_worker(files_of_course)
    from autograder.worker import worker

    for folder in worker._PREPARED.values():
        folder.chmod(0o711)
    # Ctrl-C reaches the whole process group: the coordinator says what was kept and stops
    # the workers; what their dying kernels' tasks print meanwhile is noise.
    signal.signal(signal.SIGINT, _quiet)
    if stop is not None:
        threading.Thread(
            target=_stop_when_told, args=(stop,), daemon=True, name="course-grade-stop"
        ).start()
    # What the worker holds before its first job (nbgrader, nbconvert, SQLAlchemy, its
    # private course) lives as long as the worker: frozen, the collections that each
    # submission's garbage sets off no longer walk it (gc.freeze).
    gc.freeze()


def _quiet(*_) -> None:
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)


def _stop_when_told(stop) -> None:
    """Remove this worker's copies of the course, end its test kernels and its student
    kernels' templates and remove their folders (the kernels themselves die with the
    worker: PR_SET_PDEATHSIG), and exit."""
    from autograder.sandbox.watchdog import kill_tree
    from autograder.worker import student_kernels, trusted_kernel, worker

    stop.wait()
    _quiet()
    for folder in [*worker._SCRATCH.values(), *worker._PREPARED.values()]:
        shutil.rmtree(folder, ignore_errors=True)
    kernels = [*trusted_kernel._TEMPLATES.values(), *student_kernels._TEMPLATES.values()]
    for kernel in kernels:
        with contextlib.suppress(Exception):
            km = kernel.km
            if km is not None and km.provisioner is not None and km.provisioner.pid:
                kill_tree(km.provisioner.pid)
                km.release_group()
        if kernel.folder is not None:
            shutil.rmtree(kernel.folder, ignore_errors=True)
    os._exit(128 + signal.SIGTERM)


@contextlib.contextmanager
def local_pool(workers: int, files_of_course: CourseFiles):
    """A ``LocalPool`` of ``workers`` grading processes, and how many."""
    pool = LocalPool(workers, files_of_course)
    try:
        yield pool, pool.workers
    except KeyboardInterrupt:  # Ctrl-C: what is recorded stays; jobs in flight go
        pool.kill()
        raise
    finally:
        pool.shutdown()


def _stall_watch(executor, config) -> stalls.StallWatch | None:
    """A local pool's watch on jobs that make no progress (none where kernels have no wall
    time, or on a cluster, whose workers are not this machine's to stop)."""
    folder = getattr(executor, "run_folder", None)
    seconds = stalls.stall_seconds(Sandbox(config=config).wall_seconds)
    return stalls.StallWatch(folder, seconds) if folder is not None and seconds else None


def _complete(executor, jobs_to_run: list[Job], workers: int, watch=None):
    """Submit a bounded window of jobs at a time; yield Results as they complete.

    When a local pool breaks (a worker died), every job it held is a suspect: each is run
    again alone, so a job that breaks the pool while it runs alone is the one that killed
    its worker, and only it is given up (fate ``error``); the others are graded. A
    ``watch`` (``stalls.StallWatch``) looks while it waits, and stops a worker stuck on
    one job: that breaks the pool too."""
    queue = list(reversed(jobs_to_run))
    suspects: list[Job] = []
    running: dict = {}  # future -> (job, whether it runs alone)
    restartable = hasattr(executor, "restart")

    def submit(job: Job, alone: bool) -> None:
        try:
            running[executor.submit(grade_job, job)] = (job, alone)
        except BrokenProcessPool:  # it broke since the last look
            executor.restart()
            running[executor.submit(grade_job, job)] = (job, alone)

    while queue or suspects or running:
        if suspects:
            if not running:
                submit(suspects.pop(), alone=True)
        else:
            while queue and len(running) < workers * IN_FLIGHT_PER_WORKER:
                submit(queue.pop(), alone=False)
        done, _ = wait(
            running, timeout=stalls.LOOK_EVERY if watch else None, return_when=FIRST_COMPLETED
        )
        if not done and watch is not None:
            watch.look()  # a worker it stops breaks the pool: its futures say so next
        broken = False
        for future in done:
            job, alone = running.pop(future)
            try:
                yield future.result()
            except BrokenProcessPool:
                broken = True
                if alone or not restartable:
                    yield _died(
                        job, alone, stalled=watch is not None and job.student in watch.students
                    )
                else:
                    suspects.append(job)
            except Exception as exc:  # a worker that died outright, or a lost cluster
                if _lost_cluster(exc):
                    raise InstructorError(
                        f"lost the Dask scheduler ({type(exc).__name__}: {exc}). What was "
                        "graded is recorded; run the same command again to grade the rest."
                    ) from None
                yield Result(
                    fates.Outcome(
                        job.student,
                        fates.ERROR,
                        digest="",
                        details=[f"grading worker failed: {exc}"],
                    ).as_dict()
                )
        if broken and restartable:
            log.warning(
                "a grading process died; %d submission(s) in flight are graded "
                "again, one at a time",
                len(running) + len(suspects),
            )
            suspects.extend(job for job, _ in running.values())  # broken with it
            running.clear()
            executor.restart()


def _died(job: Job, alone: bool, stalled: bool = False) -> Result:
    if stalled:
        why = (
            "its grading made no progress for longer than its kernels may live, among others "
            "and again alone: the grader's fault (its stacks are in the run's output), not "
            "the submission's; the next run grades it again"
        )
    elif alone:
        why = (
            "its grading process died while grading it alone (killed, perhaps for memory); "
            "the other submissions were graded"
        )
    else:
        why = "its grading process died"
    return Result(fates.Outcome(job.student, fates.ERROR, digest="", details=[why]).as_dict())


def _workers(executor) -> int:
    client = getattr(executor, "_client", None)
    if client is None:
        return os.cpu_count() or 1
    return max(
        1, sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values())
    )


def _lost_cluster(exc: BaseException) -> bool:
    kind = type(exc).__name__
    return kind in ("CommClosedError", "CancelledError") or (
        kind.endswith("TimeoutError") and "scheduler" in str(exc).lower()
    )


def record(
    course_root: Path, assignment: str, result: Result, holders: SecretHolders | None = None
) -> dict:
    """Write a Result into the course: its files, then its grades with nbgrader's own
    preprocessors, into whatever gradebook the course uses. ``holders``: the run's view of
    who holds which feedback secret (one for a whole run; None: read afresh)."""
    outcome = dict(result.outcome)
    student = outcome["student_id"]
    log.info(
        "%s: %s, %s of %s points before any late penalty, %s s; %s",
        student,
        outcome.get("fate"),
        outcome.get("score"),
        outcome.get("max_score"),
        outcome.get("seconds"),
        "; ".join(outcome.get("details") or []) or "no details",
    )
    autograded, feedback = dict(result.autograded), dict(result.feedback)
    extras = exchange_files(result)  # what nbgrader's release_feedback reads beside each page
    if holders is None:
        holders = SecretHolders(course_root, assignment)
    shared = holders.others(extras[SECRET_FILE], student)
    if shared:
        extras[SECRET_FILE] = new_secret()
        for other in shared:
            written = _give_new_secret(course_root, assignment, other)
            holders.wrote(other, written)
            if written is None:
                continue  # no page of theirs yet: it is named afresh when they are graded
            holders.renamed[other] = (
                f"this student's feedback page has a new random name: the submission of "
                f"{student} holds the same {SECRET_FILE} (one of the two copied the "
                "other's), so nbgrader fetch_feedback cannot find it; hand it back another "
                "way (until this student is graded again)"
            )
        note = (
            f"its {SECRET_FILE} is also in the submission of {', '.join(shared)}: one "
            "student copied another's (from a home folder others may read). Each feedback "
            "page now has a new random name that neither can fetch with nbgrader "
            "fetch_feedback: hand their feedback back another way"
        )
        outcome["details"] = [*(outcome.get("details") or []), note]
        log.warning("%s: %s", student, note)
    for files in (autograded, feedback):  # (generate_feedback copies autograded's to feedback)
        if files:
            files.update(extras)
    _replace(course_root / "autograded" / student / assignment, autograded)
    _replace(course_root / "feedback" / student / assignment, feedback)
    holders.wrote(student, extras[SECRET_FILE] if feedback else None)
    notebooks = {
        name: data
        for name, data in result.autograded.items()
        if name.endswith(".ipynb") and "/" not in name
    }
    if not notebooks:
        _zero_submission(course_root, assignment, student, result.timestamp)
        holders.wrote(student, None)  # its pages are gone
        return outcome
    score, max_score = _save_grades(course_root, assignment, student, notebooks, result.timestamp)
    outcome["score"], outcome["max_score"] = score, max_score
    return outcome


SECRET = re.compile(r"^[0-9A-Za-z]{16,512}$")
SECRET_FILE = "submission_secret.txt"


def new_secret() -> bytes:
    return secrets.token_hex(64).encode()


class SecretHolders:
    """Which other students hold a secret, in their feedback page or in their submission.
    nbgrader's release_feedback names each page by a hash of its secret, and fetch_feedback
    finds a student's page by the secret their own submit kept: a student who put a
    classmate's secret into their own submission (attack 19: read from the classmate's
    nbgrader cache) had their page released under the classmate's name, over the
    classmate's. The submissions count as well as the pages: a copier graded before the
    secret's owner (an earlier run, or earlier in this one) found no page holding it and
    kept the owner's name, which a release between the two handed to the owner (attack 25).

    Read from the course once, then kept as a run writes pages (read afresh for each
    submission recorded, every classmate's file was read each time: a million reads for a
    class of a thousand). A run is the only writer of the course's feedback (the CLI's run
    lock), and every page it writes goes through ``record``, which says what it wrote
    (``wrote``); submissions do not change during a run. A holder found in memory is read
    again from its file before anything is done about it."""

    def __init__(self, course_root: Path, assignment: str):
        self.pages = Path(course_root) / "feedback"
        self.submitted = Path(course_root) / "submitted"
        self.assignment = assignment
        # folder -> (student -> the secret found there), each read once
        self._known: dict[Path, dict[str, bytes]] = {}
        # classmates whose page ``record`` renamed -> the note their own line must carry
        self.renamed: dict[str, str] = {}

    def others(self, secret: bytes, student: str) -> list[str]:
        wanted = secret.strip()
        return sorted(
            {
                other
                for root in (self.pages, self.submitted)
                for other, held in self._holders(root).items()
                if other != student and held == wanted and self._read(root, other) == wanted
            }
        )

    def wrote(self, student: str, secret: bytes | None) -> None:
        """``student``'s page now holds ``secret`` (None: no page, or none with a secret)."""
        pages = self._known.get(self.pages)
        if pages is None:
            return  # not read yet: it will read what is there
        if secret is None:
            pages.pop(student, None)
        else:
            pages[student] = secret.strip()

    def _holders(self, root: Path) -> dict[str, bytes]:
        if root not in self._known:
            found = {}
            for folder in root.glob(f"*/{self.assignment}"):
                held = self._read(root, folder.parent.name)
                if held is not None:
                    found[folder.parent.name] = held
            self._known[root] = found
        return self._known[root]

    def _read(self, root: Path, student: str) -> bytes | None:
        try:
            found = safefiles.read_bytes(root / student / self.assignment / SECRET_FILE, 4096)
        except (OSError, safefiles.Unsafe):
            return None
        found = found.strip()
        return found if SECRET.fullmatch(found.decode(errors="replace")) else None


def _give_new_secret(course_root: Path, assignment: str, student: str) -> bytes | None:
    """A fresh secret in ``student``'s pages; the one their feedback now holds, or None."""
    fresh = new_secret()
    written = None
    for kind in ("autograded", "feedback"):
        target = course_root / kind / student / assignment / SECRET_FILE
        if target.is_file() and not target.is_symlink():
            part = target.with_name(f".{SECRET_FILE}.{secrets.token_hex(4)}")
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            os.fchmod(fd, 0o644 & ~safefiles.umask())
            with os.fdopen(fd, "wb") as f:
                f.write(fresh)
            os.replace(part, target)
            if kind == "feedback":
                written = fresh
    return written


def exchange_files(result: Result) -> dict[str, bytes]:
    """timestamp.txt and submission_secret.txt, as nbgrader's autograde and generate_feedback
    would have copied them: ``nbgrader release_feedback`` reads both beside each page and
    names the released page by a hash of the secret, which only the submitting student's
    ``fetch_feedback`` knows. A submission that came without one (an LMS zip, a folder) gets
    a fresh random secret: release_feedback works for the whole class, and such a page is
    published under a name nobody can guess (hand it back through the LMS). The timestamp
    was checked as a date before grading; an unknown one is left empty (nbgrader only
    prints it)."""
    secret = result.secret if result.secret and SECRET.fullmatch(result.secret) else None
    return {
        "timestamp.txt": (result.timestamp or "").encode(),
        SECRET_FILE: secret.encode() if secret else new_secret(),
    }


def _save_grades(
    course_root: Path,
    assignment: str,
    student: str,
    notebooks: dict[str, bytes],
    timestamp: str | None,
) -> tuple[float, float]:
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    from autograder.late_penalties import CheckedLatePenalties
    from autograder.save_grades import SaveAutoGradesAtOnce

    config = grading_config(course_root)
    db_url = config.CourseDirectory.db_url
    with Gradebook(db_url) as gb:
        gb.update_or_create_student(student)
        # A submission without a date (a folder import) has none: never an older
        # attempt's, with its late penalty (nbgrader's own autograde keeps that one).
        stamp = parse_utc(timestamp) if timestamp else None
        gb.update_or_create_submission(assignment, student, timestamp=stamp)
        for name, data in notebooks.items():
            nb = nbformat.reads(data.decode("utf-8"), as_version=4)
            resources = {
                "nbgrader": {
                    "notebook": name[: -len(".ipynb")],
                    "assignment": assignment,
                    "student": student,
                    "db_url": db_url,
                }
            }
            for preprocessor in (SaveAutoGradesAtOnce, CheckedLatePenalties):
                preprocessor(config=config).preprocess(nb, resources)
        gb.db.expire_all()  # the preprocessors wrote through gradebooks of their own
        submission = gb.find_submission(assignment, student)
        return float(submission.score), float(submission.max_score)


def _replace(dest: Path, files: dict[str, bytes]) -> None:

    if files or dest.exists():
        safefiles.replace_folder(dest, files)


def _zero_submission(
    course_root: Path, assignment: str, student: str, timestamp: str | None = None
) -> None:
    """A submission that cannot be graded scores 0, never an older attempt's grades, and
    its student is in the gradebook, so grades.csv lists them. Its date is this attempt's
    (``timestamp``, a date already checked), or none: never the older attempt's. The older
    attempt's graded notebook and feedback page go too: ``nbgrader release_feedback`` would
    hand that page back as if it were this submission's."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.utils import parse_utc

    for kind in ("autograded", "feedback"):
        stale = course_root / kind / student / assignment
        if stale.is_symlink() or stale.is_file():
            stale.unlink()
        elif stale.is_dir():
            shutil.rmtree(stale)  # never follows a link inside
    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        gb.update_or_create_student(student)
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return
        submission.timestamp = parse_utc(timestamp) if timestamp else None
        for notebook in submission.notebooks:
            # The older attempt's late penalty is not this one's: nbgrader's own export
            # showed "raw 0, penalty 30" for it (outside attack 65).
            notebook.late_submission_penalty = None
            for grade in notebook.grades:
                grade.auto_score = 0
        gb.db.commit()
