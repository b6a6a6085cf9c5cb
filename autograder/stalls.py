"""A grading job that stops making progress, found and ended (a local pool's workers).

Every limit of a submission is a kernel's (wall time, CPU, memory, its cells' timeouts),
and a kernel past one is killed; so a job ends within about two kernels' lives, its
feedback page's 30 s and nbgrader's own steps. A worker that waits longer waits on the
grader's own fault (a lock, a pipe, a process that will not end), and the whole run used
to wait with it, for ever: nothing said, nothing graded after it.

The contract, between the two sides of a local pool:

- a worker marks the job it runs with a file of the pool's run folder,
  ``jobs/<its pid>``, from the job's start to its end (``working_on``): the student's id
  and the worker's start time (so a pid the system gave to another process since is never
  taken for the worker);
- the coordinator looks at the marks while it waits for results (``StallWatch.look``): a
  worker whose mark is older than ``stall_seconds`` is asked for its threads' stacks
  (SIGUSR2: ``autograder.logs``, on the run's stderr) and killed. That breaks the pool, and
  every job it held is graded again alone (``grade._complete``); a job that stalls while
  alone is given up (fate ``error``: graded again by the next run).

Only the grader's own processes write the run folder (the kernels run as other users, in
sandboxes that do not hold it), and a mark is read as a pid and a number, nothing else.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

from autograder.printable import printable
from autograder.sandbox.procs import started

log = logging.getLogger(__name__)

FOLDER = "jobs"
# Beyond two kernels' lives: feedback, nbgrader's steps, a loaded machine's slowness.
SLACK_SECONDS = 180
# How often the coordinator looks while it waits (seconds).
LOOK_EVERY = 10.0
STACKS_WAIT = 1.0  # for the worker to write its stacks before it is killed


def stall_seconds(wall_seconds: int) -> float:
    """How long a job may run before its worker is taken for stuck, for kernels that live
    ``wall_seconds`` at most (``Sandbox.wall_seconds``; 0: no limit, so no watch)."""
    return 2 * wall_seconds + SLACK_SECONDS if wall_seconds else 0.0


@contextlib.contextmanager
def working_on(run_folder: Path | None, student: str):
    """While a worker grades ``student``: its mark in ``run_folder`` (None: not a local
    pool's worker, no mark)."""
    if run_folder is None:
        yield
        return
    folder = run_folder / FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    mark = folder / str(os.getpid())
    temporary = folder / f".{os.getpid()}"
    temporary.write_text(f"{started(os.getpid())}\n{student}\n")
    os.replace(temporary, mark)  # whole or absent, and its time is the job's start
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            mark.unlink()


class StallWatch:
    """The coordinator's look at its workers' marks."""

    def __init__(self, run_folder: Path, seconds: float):
        self.folder, self.seconds = run_folder / FOLDER, seconds
        self.students: set[str] = set()  # whose job was stopped for making no progress

    def look(self) -> list[str]:
        """Stop every worker stuck on one job longer than ``seconds``; their students."""
        stopped = []
        now = time.time()
        for mark in self._marks():
            try:
                text = mark.read_text()
                age = now - mark.stat().st_mtime
            except OSError:
                continue
            lines = text.split("\n")
            pid, since, student = int(mark.name), lines[0], lines[1] if len(lines) > 1 else ""
            if started(pid) != since:  # that worker is gone (killed): its mark goes too
                with contextlib.suppress(OSError):
                    mark.unlink()
                continue
            if age < self.seconds:
                continue
            log.error(
                "the grading of %s made no progress for %d s: its worker (pid %d) writes "
                "its stacks on stderr, is stopped, and what it held is graded again alone",
                printable(student),
                age,
                pid,
            )
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR2)
                time.sleep(STACKS_WAIT)
                if started(pid) == since:
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                mark.unlink()
            self.students.add(student)
            stopped.append(student)
        return stopped

    def _marks(self) -> list[Path]:
        try:
            return [m for m in self.folder.iterdir() if m.name.isdigit()]
        except OSError:
            return []
