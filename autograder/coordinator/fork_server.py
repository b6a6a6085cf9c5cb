"""Where a local pool's grading processes come from: multiprocessing's fork server.

The fork server is one process started afresh (never a fork of the coordinator, whose
threads may hold locks) that imports ``WORKER_PRELOAD`` once and forks every worker from
there, restarted ones too. A worker starts from the fork server's state, which has run no
job: only imports. What a spawned worker got from the coordinator at its start it still
gets: its environment (``grade.init_pool_worker``), its current folder and ``sys.path``
(multiprocessing's own).

``start`` starts it before the coordinator's own imports (``autograder.coordinator.launch``):
both import nbgrader, SQLAlchemy and the grader, about a CPU second each, and on two cores
they import side by side. It is started as the pool would start it, with Ctrl-C blocked
(``sigint_blocked``) and the resource tracker quiet; the pool later finds it running.

This module imports nothing of the grader's, so that the coordinator's entry point can
start the fork server first.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal

# What every grading process imports before its first job (nbgrader, nbconvert, nbclient,
# SQLAlchemy: about 1 CPU s): the module a worker is started from and the one that grades.
# By name, so that this module imports neither; test_grade_pool checks that a worker has
# both (an import that fails in the fork server is skipped there, without a word).
WORKER_PRELOAD = ("autograder.coordinator.grade", "autograder.worker.worker")


def context():
    """The fork server's multiprocessing context, its preload set."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(WORKER_PRELOAD))
    return ctx


@contextlib.contextmanager
def sigint_blocked():
    """Ctrl-C is the coordinator's: a worker that got it while still starting (before its
    initializer's handler) printed a traceback. The fork server and the workers start with
    it blocked, which they inherit, and a worker unblocks it once its handler is in place
    (``grade.init_pool_worker``)."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def start() -> None:
    """Start the fork server now (it imports ``WORKER_PRELOAD`` meanwhile); a pool started
    later uses it. Never raises: where it cannot start here, the pool starts it as before."""
    from multiprocessing import forkserver

    try:
        context()
        quiet_resource_tracker()
        with sigint_blocked():
            forkserver.ensure_running()
    except Exception:  # noqa: BLE001 - the pool starts it, and says why if it cannot
        pass


def quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with its stderr on /dev/null. After Ctrl-C
    the pool ends at once (``os._exit``), and the tracker unlinks the pool's semaphores,
    as it should, then warns of them as "leaked" on the instructor's terminal: its
    cleanup stays, its words are not the instructor's business."""
    from multiprocessing import resource_tracker

    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)  # the tracker keeps fd 2 as its stderr
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def let_it_end_with_the_coordinator() -> None:
    """In a worker forked by the fork server: close the end of the fork server's "alive"
    pipe that multiprocessing hands every child it forks (so that a child could ask it
    for processes of its own, which a worker never does). The fork server ends when every
    holder has closed it; with the workers holding it, a killed coordinator left the fork
    server, its workers and their kernels running for good, each waiting for the other
    (a worker dies with its parent, the fork server)."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    alive = getattr(server, "_forkserver_alive_fd", None)
    if alive is not None and multiprocessing.parent_process() is not None:
        with contextlib.suppress(OSError):
            os.close(alive)
        server._forkserver_alive_fd = None
