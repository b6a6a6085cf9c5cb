"""A local-pool worker that dies, or stops making progress, costs only its own submission
(issue 17).

A dead worker breaks a ``ProcessPoolExecutor`` and every job in flight with it. The
coordinator starts the pool again and runs each job it held once more, alone: the one
that breaks the pool while alone is given up, the others are graded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

from autograder import stalls
from autograder.coordinator import fork_server, grade
from autograder.job import CourseFiles, Job, Result


class FlakyPool:
    """A restartable executor whose pool breaks while it runs the job of ``killer``:
    every job in flight then fails as a broken process pool's would."""

    def __init__(self):
        self.restarts = 0
        self._new()

    def _new(self):
        self.pool = ThreadPoolExecutor(2)
        self.broken = threading.Event()

    def submit(self, fn, job):
        if self.broken.is_set():
            raise BrokenProcessPool("broken")
        broken = self.broken

        def run():
            time.sleep(0.05)
            if job.student == "killer":
                broken.set()
                raise BrokenProcessPool("a worker died")
            time.sleep(0.1)
            if broken.is_set():
                raise BrokenProcessPool("broken with it")
            return fn(job)

        return self.pool.submit(run)

    def restart(self):
        self.restarts += 1
        self._new()


def job(student):
    return Job(student, "digest", {}, CourseFiles("unit", "", {}))


def test_only_the_submission_that_kills_its_worker_is_given_up(monkeypatch):
    monkeypatch.setattr(
        grade, "grade_job", lambda j: Result({"student_id": j.student, "fate": "graded"})
    )
    pool = FlakyPool()
    students = [f"s{i}" for i in range(5)] + ["killer"] + [f"t{i}" for i in range(5)]
    results = [r.outcome for r in grade._complete(pool, [job(s) for s in students], workers=2)]
    fates = {o["student_id"]: o["fate"] for o in results}
    assert sorted(fates) == sorted(students) and len(results) == len(students)
    assert fates.pop("killer") == "error" and set(fates.values()) == {"graded"}
    killer = next(o for o in results if o["student_id"] == "killer")
    assert "alone" in killer["details"][0]
    assert pool.restarts >= 2  # once when it broke among others, once when it broke alone


class StuckPool(FlakyPool):
    """A restartable executor on which the job of ``stuck`` never ends until the pool is
    broken (as ``StallWatch`` breaks a local pool by killing the stuck worker)."""

    def submit(self, fn, job):
        if self.broken.is_set():
            raise BrokenProcessPool("broken")
        broken = self.broken

        def run():
            if job.student == "stuck":
                broken.wait()
            if broken.is_set():
                raise BrokenProcessPool("its worker was stopped")
            return fn(job)

        return self.pool.submit(run)


class Watch:
    def __init__(self, pool):
        self.pool, self.students, self.looks = pool, set(), 0

    def look(self):
        self.looks += 1
        if self.looks % 3:  # not stuck for long enough yet
            return []
        self.pool.broken.set()
        self.students.add("stuck")
        return ["stuck"]


def test_a_job_that_makes_no_progress_is_given_up_and_the_rest_graded(monkeypatch):
    monkeypatch.setattr(
        grade, "grade_job", lambda j: Result({"student_id": j.student, "fate": "graded"})
    )
    monkeypatch.setattr(grade.stalls, "LOOK_EVERY", 0.02)
    pool = StuckPool()
    watch = Watch(pool)
    students = ["a", "b", "stuck", "c", "d"]
    results = [r.outcome for r in grade._complete(pool, [job(s) for s in students], 2, watch)]
    fates = {o["student_id"]: o["fate"] for o in results}
    assert sorted(fates) == sorted(students) and len(results) == len(students)
    assert fates.pop("stuck") == "error" and set(fates.values()) == {"graded"}
    stuck = next(o for o in results if o["student_id"] == "stuck")
    assert "no progress" in stuck["details"][0] and "again alone" in stuck["details"][0]
    assert watch.looks >= 6  # stopped among others, then again alone


STUCK_WORKER = """
import sys, time
from pathlib import Path
from autograder import logs, stalls
logs.configure()
with stalls.working_on(Path(sys.argv[1]), "ada"):
    print("marked", flush=True)
    time.sleep(60)
"""


def test_the_watch_stops_a_worker_stuck_on_one_job_after_its_stacks(tmp_path):
    """The real watch, on a process that marks its job as a local pool's worker does and
    then waits for ever: past the stall time, its stacks are written and it is killed; a
    mark whose process is gone (or whose pid is another process's now) is removed."""
    worker = subprocess.Popen(
        [sys.executable, "-c", STUCK_WORKER, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout.readline() == "marked\n"
    (tmp_path / stalls.FOLDER / str(os.getpid())).write_text("1\nbob\n")  # not this process
    watch = stalls.StallWatch(tmp_path, seconds=60)
    assert watch.look() == [] and worker.poll() is None  # not stuck for long enough
    assert not (tmp_path / stalls.FOLDER / str(os.getpid())).exists()
    watch.seconds = 0.0
    assert watch.look() == ["ada"] and watch.students == {"ada"}
    _, err = worker.communicate(timeout=30)
    assert worker.returncode == -signal.SIGKILL
    assert "most recent call first" in err and "<string>" in err
    assert not list((tmp_path / stalls.FOLDER).iterdir())


def test_a_worker_marks_its_job_only_in_a_local_pools_run_folder(tmp_path):
    with stalls.working_on(None, "ada"):
        assert not (tmp_path / stalls.FOLDER).exists()
    with stalls.working_on(tmp_path, "ada"):
        mark = tmp_path / stalls.FOLDER / str(os.getpid())
        assert mark.read_text().split("\n")[1] == "ada"
    assert not mark.exists()


@pytest.mark.slow
def test_the_local_pool_starts_again_after_a_worker_is_killed():
    """... and what a killed worker could not remove (its copies of the course) goes with
    the pool's run folder when the pool ends (an instructor's Ctrl-C left copies in /tmp)."""
    from autograder.worker import tmpdirs

    with grade.local_pool(1, None) as (pool, _):
        pid = pool.submit(os.getpid).result(timeout=120)
        folder = pool.submit(tmpdirs.make, "cg-course-").result(timeout=120)
        assert folder.parent == pool.run_folder and folder.is_dir()
        # where its jobs' marks go, for the coordinator's stall watch (``stalls``)
        assert pool.submit(tmpdirs.run_folder).result(timeout=120) == pool.run_folder
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            pool.submit(os.getpid).result(timeout=120)
        pool.restart()
        assert pool.submit(os.getpid).result(timeout=120) != pid
    assert not folder.exists() and not pool.run_folder.exists()


def test_a_run_folder_whose_coordinator_is_gone_is_removed_and_a_live_ones_kept(tmp_path):
    """A coordinator killed before it removed its run folder (copies of the course,
    submissions) leaves it behind: the next run of the same user removes it, and never
    one whose coordinator still runs."""
    import subprocess
    import sys

    from autograder.worker import tmpdirs

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = Path(tempfile.mkdtemp(prefix=f"cg-run-{gone.stdout.strip()}-", dir="/tmp"))
    (dead / "cg-course-x" / "source").mkdir(parents=True)
    (dead / "cg-course-x" / "source" / "hidden.txt").write_text("a hidden test")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (dead / "cg-course-x" / "link").symlink_to(outside)
    live = tmpdirs.new_run()
    try:
        removed = tmpdirs.remove_stale()
        assert dead in removed and not dead.exists()
        assert live.exists() and live not in removed
        assert outside.read_text() == "keep me"  # a link inside is never followed
        assert live.stat().st_mode & 0o777 == 0o711
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(dead, ignore_errors=True)


def _worker_facts(names):
    """In a worker: its parent's command line, and its environment's values for ``names``."""
    import sys

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    return parent, {n: os.environ.get(n) for n in names}, sorted(sys.modules)


def _frozen_before_and_after_a_child():
    import gc

    from autograder.worker import limited_child

    before = gc.get_freeze_count()
    limited_child.run(lambda: (True, ""))
    return before, gc.get_freeze_count()


@pytest.mark.slow
def test_a_workers_imports_are_frozen_for_good_before_its_first_job():
    """What a worker imported is never walked by its collections (gc.freeze), also after
    it forked a child for a feedback page."""
    with grade.local_pool(1, None) as (pool, _):
        before, after = pool.submit(_frozen_before_and_after_a_child).result(120)
    assert before > 50_000 and after == before


@pytest.mark.slow
def test_workers_come_from_a_fork_server_that_imported_them_and_get_the_coordinators_environment(
    monkeypatch,
):
    """Each worker is forked from multiprocessing's fork server, which imported what grades
    (``WORKER_PRELOAD``) once; a pool started later, after the coordinator's environment
    changed, gives its workers the environment as it is then, as spawned workers had."""
    monkeypatch.setenv("COURSE_GRADE_TEST_ENV", "first")
    monkeypatch.delenv("COURSE_GRADE_TEST_GONE", raising=False)
    with grade.local_pool(1, None) as (pool, _):
        parent, env, _ = pool.submit(_worker_facts, ["COURSE_GRADE_TEST_ENV"]).result(120)
    assert "forkserver" in parent and parent != open(f"/proc/{os.getpid()}/cmdline").read()
    assert env == {"COURSE_GRADE_TEST_ENV": "first"}
    monkeypatch.setenv("COURSE_GRADE_TEST_ENV", "second")
    with grade.local_pool(1, None) as (pool, _):  # the same fork server, started before
        parent_again, env, modules = pool.submit(
            _worker_facts, ["COURSE_GRADE_TEST_ENV", "COURSE_GRADE_TEST_GONE"]
        ).result(120)
    assert parent_again == parent
    assert env == {"COURSE_GRADE_TEST_ENV": "second", "COURSE_GRADE_TEST_GONE": None}
    assert set(fork_server.WORKER_PRELOAD) <= set(modules)


@pytest.mark.slow
def test_a_submission_the_grader_cannot_read_is_its_own_error_and_the_class_goes_on(
    tmp_path, monkeypatch
):
    """An outside attack's notebook made the coordinator's own reading of it raise
    (before the fix of that read): the run stopped with a traceback before grading anyone,
    on every run. Such a submission is its student's `error`, said, and the rest graded."""
    from concurrent.futures import ThreadPoolExecutor

    import nbformat

    from autograder.coordinator import inbox
    from tests.class_fixture import ASSIGNMENT, NOTEBOOK, build_course, honest_cases

    course = build_course(tmp_path)
    honest = honest_cases()[0].nb
    for student in ("ada", "bo"):
        dest = course / "submitted" / student / ASSIGNMENT
        dest.mkdir(parents=True)
        nb = nbformat.from_dict(honest)
        if student == "bo":
            nb.cells.append(nbformat.v4.new_markdown_cell("UNREADABLE"))
        nbformat.write(nb, dest / NOTEBOOK)
    reads = inbox.ordinary_cells

    def ordinary_cells(files, *args):
        if any(b"UNREADABLE" in data for data in files.values()):
            raise RecursionError("maximum recursion depth exceeded")
        return reads(files, *args)

    monkeypatch.setattr(inbox, "ordinary_cells", ordinary_cells)
    graded = []

    def stand_in(job):
        graded.append(job.student)
        return Result({"student_id": job.student, "fate": "error", "details": ["stand-in"]})

    monkeypatch.setattr(grade, "grade_job", stand_in)
    with ThreadPoolExecutor(1) as executor:
        outcomes = {
            o["student_id"]: o
            for o in grade.grade_assignment(course, ASSIGNMENT, executor=executor, sandbox=False)
        }
    assert graded == ["ada"]
    assert outcomes["bo"]["fate"] == "error"
    assert (
        "the grader could not read the submission (RecursionError" in outcomes["bo"]["details"][0]
    )
