"""The worker's own work on a student's notebook runs in a forked child within limits of
CPU, memory and wall time (``autograder.worker.limited_child``), and the worker goes on."""

from __future__ import annotations

import atexit
import resource
import threading
import time
import types

from autograder.worker import limited_child
from autograder.worker.limited_child import Limits

SMALL = Limits(cpu_seconds=1, memory=256 << 20, wall_seconds=5)


def test_work_done_within_its_limits_says_what_it_says():
    ended = limited_child.run(lambda: (True, "made 1 page"), SMALL)
    assert ended.ok and ended.said == "made 1 page" and ended.why == ""


def test_work_that_fails_or_raises_is_not_done_and_its_words_come_back():
    assert limited_child.run(lambda: (False, "nbgrader: no such notebook"), SMALL).said == (
        "nbgrader: no such notebook"
    )
    raised = limited_child.run(lambda: 1 / 0, SMALL)
    assert not raised.ok and raised.why == "it failed" and not raised.stopped


def test_work_past_its_cpu_is_ended_by_the_kernel_and_costs_the_worker_nothing():
    before = resource.getrusage(resource.RUSAGE_SELF)

    def spin():
        while True:
            pass

    ended = limited_child.run(spin, SMALL)
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert not ended.ok and ended.why == "it took more than 1 s of CPU" and ended.stopped
    assert 0.9 <= ended.cpu_seconds < 2.5  # rusage counts a little less than the limit sees
    assert after.ru_utime - before.ru_utime < 0.5  # the child's seconds, not this process's


def test_work_past_its_memory_fails_to_allocate_and_the_worker_keeps_its_own():
    def hog():
        held = []
        while True:
            held.append(bytearray(16 << 20))

    ended = limited_child.run(hog, Limits(memory=256 << 20))  # CPU to spare: memory ends it
    assert not ended.ok and ended.why == "it needed more than 256 MB of memory" and ended.stopped
    assert ended.max_rss_mb < 256 + resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_work_past_its_wall_time_is_killed():
    start = time.monotonic()
    ended = limited_child.run(lambda: time.sleep(60), Limits(wall_seconds=0.5))
    assert not ended.ok and ended.why == "it took more than 0.5 s" and ended.stopped
    assert time.monotonic() - start < 5


def test_the_workers_exit_handlers_never_run_in_the_child(tmp_path):
    marker = tmp_path / "ran"
    handler = marker.touch
    atexit.register(handler)
    try:
        assert limited_child.run(lambda: (True, ""), SMALL).ok
        assert limited_child.run(lambda: 1 / 0, SMALL).why == "it failed"
        assert not marker.exists()
    finally:
        atexit.unregister(handler)


def test_a_lock_another_thread_holds_at_the_fork_is_fresh_in_the_child():
    state = types.ModuleType("state")
    state.LOCK = threading.Lock()
    limited_child.fresh_locks(state, "LOCK")
    taken, release = threading.Event(), threading.Event()

    def hold():
        with state.LOCK:
            taken.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait()
    try:
        ended = limited_child.run(lambda: (state.LOCK.acquire(timeout=2), ""), SMALL)
    finally:
        release.set()
        holder.join()
        limited_child._IN_CHILD.pop()
    assert ended.ok


def test_what_the_worker_froze_stays_frozen_and_nothing_else_is_left_frozen():
    """A run freezes the worker's objects for the child's collector and thaws them after,
    unless the worker froze its own (a pool worker, after its start): those stay frozen.
    Told by an object of the test's own: a frozen object is in none of the collector's
    generations (``gc.get_objects``). The freeze count alone moves when another thread of
    the process frees objects that were frozen (a CI run lost 7 of 392,829 meanwhile)."""
    import gc

    def frozen(thing) -> bool:
        return all(o is not thing for o in gc.get_objects())

    # Another test in this process may have run a worker's start, which froze its own.
    mine = [object()]
    already = gc.get_freeze_count() > 0
    limited_child.run(lambda: (True, ""), SMALL)
    assert not frozen(mine)  # thawed after the run (and never frozen where the worker had)
    assert (gc.get_freeze_count() > 0) == already
    gc.freeze()
    try:
        assert frozen(mine)
        limited_child.run(lambda: (True, ""), SMALL)
        assert frozen(mine)  # the worker's own freeze stays
    finally:
        gc.unfreeze()
    assert not frozen(mine)
