"""Run the worker's own work on what a student made in a forked child, within limits.

Threat model: a submission is data the worker reads after the kernels are gone: outputs
of every MIME type, markdown, ANSI escapes, attachments, cell metadata. nbgrader,
nbconvert, bleach, mistune and pygments read it in the worker, with the worker's time
and memory, which a classmate graded next waits on. Three outside attacks in a row each
found one more path whose cost grew faster than the input (a lexer named in metadata,
a table of pipes, 330,000 ANSI escapes), and each was bounded by a rule of its own.
``run`` bounds every such path, found or not, by construction: the work runs in a child
forked for it, which has

- its own CPU limit (``RLIMIT_CPU``; a fork's CPU count starts at zero): past it the
  kernel ends it (``SIGXCPU``, then ``SIGKILL``);
- its own memory limit: its address space may grow by ``Limits.memory`` over what the
  worker had mapped when it forked (``RLIMIT_AS``); past it allocation fails;
- a wall-clock limit: the worker kills it (``SIGKILL``) and stops waiting.

The child runs only the worker's own code (it executes nothing of the student's) with
the worker's rights and a copy of its memory; it dies with the worker
(``PR_SET_PDEATHSIG``) and always leaves by ``os._exit``, so that none of the worker's
``atexit`` handlers (which remove its prepared course) run in it. What comes back is its
exit status, its resource use and at most ``MAX_SAID`` bytes it chose to say; a caller
reads the files the child wrote only when ``Ended.ok``.

Fork safety: only the forking thread exists in the child. A lock another thread held at
the fork (a Dask worker's second grading thread) stays held there; the locks the child's
work takes are given fresh ones (``fresh_locks``), and a child that waits on one anyway
ends at the wall-clock limit like any other. Modules whose state the child's work uses
register with ``in_child`` what makes it safe there: fresh locks, and SQLAlchemy pools
that forget the worker's connections (``gradebooks``). zmq's sockets and threads are not
used in the child. (``os.register_at_fork`` would also run these in the children that
``subprocess`` forks to start a kernel, before they exec.)
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import resource
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_PR_SET_PDEATHSIG = 1
MAX_SAID = 16_384  # bytes a child may say: under a pipe's buffer, so it never blocks
MEMORY_ERROR, FAILED = 3, 4  # exit codes of a child whose work raised


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 10
    memory: int = 1 << 30  # bytes of address space over the worker's at the fork
    wall_seconds: float = 30.0


@dataclass
class Ended:
    ok: bool
    why: str = ""  # why not, for a person: "it took more than 10 s of CPU"
    stopped: bool = False  # a limit ended it (not a failure of the work's own)
    said: str = ""
    cpu_seconds: float = 0.0
    max_rss_mb: float = 0.0


_IN_CHILD: list[Callable[[], None]] = []


def in_child(prepare: Callable[[], None]) -> None:
    """Call ``prepare`` first in every child ``run`` forks."""
    if prepare not in _IN_CHILD:
        _IN_CHILD.append(prepare)


def fresh_locks(module, *names: str) -> None:
    """Give ``module``'s locks ``names`` new, unheld ones in every child ``run`` forks:
    the thread that held one at the fork does not exist there."""

    def fresh() -> None:
        for name in names:
            setattr(module, name, threading.Lock())

    in_child(fresh)


def run(work: Callable[[], tuple[bool, str]], limits: Limits = Limits()) -> Ended:
    """Run ``work`` in a forked child within ``limits``; ``work`` returns whether it did
    its job and what to say (its log's tail; a ``MemoryError`` it names there counts as one
    it raised). Never raises for what the child did."""
    reader, writer = os.pipe()
    mapped = _address_space()
    # The child's collector leaves the worker's objects alone: walking them would write
    # to (and so copy) every page of the worker's heap. A worker froze what it holds
    # before its first job (grade.init_pool_worker), which stays so: unfreezing here would
    # thaw that too, and freezing more would keep for good any garbage not yet collected.
    freeze_here = gc.get_freeze_count() == 0
    if freeze_here:
        gc.freeze()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        _child(work, writer, mapped, limits)
    if freeze_here:
        gc.unfreeze()
    os.close(writer)
    try:
        return _wait(pid, reader, limits)
    finally:
        os.close(reader)


def _child(work, writer: int, mapped: int, limits: Limits) -> None:
    code = FAILED
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for prepare in _IN_CHILD:
            prepare()
        cpu = limits.cpu_seconds
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        room = mapped + limits.memory
        resource.setrlimit(resource.RLIMIT_AS, (room, room))
        try:
            ok, said = work()
        except MemoryError:
            code, said = MEMORY_ERROR, ""
        else:
            # nbgrader catches a MemoryError and logs it: its words say so
            code = 0 if ok else MEMORY_ERROR if "MemoryError" in said else FAILED
        with contextlib.suppress(Exception):
            os.write(writer, said.encode(errors="replace")[-MAX_SAID:])
    except BaseException:  # noqa: BLE001 (nothing may leave the child but its exit)
        pass
    finally:
        os._exit(code)


def _wait(pid: int, reader: int, limits: Limits) -> Ended:
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + limits.wall_seconds
        walled = False
        while not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            if time.monotonic() >= deadline:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                walled = True
                break
        _, status, usage = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    said = _said(reader)
    cpu = usage.ru_utime + usage.ru_stime
    ended = Ended(False, "", False, said, round(cpu, 2), round(usage.ru_maxrss / 1024, 1))
    killed = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        ended.ok = True
    elif walled:
        ended.why, ended.stopped = f"it took more than {limits.wall_seconds:g} s", True
    elif killed == signal.SIGXCPU or (killed == signal.SIGKILL and cpu >= limits.cpu_seconds):
        # (the kernel's sampled CPU time reaches the limit a little before rusage's does)
        ended.why, ended.stopped = f"it took more than {limits.cpu_seconds} s of CPU", True
    elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == MEMORY_ERROR:
        ended.why, ended.stopped = f"it needed more than {limits.memory >> 20} MB of memory", True
    elif killed is not None:
        ended.why = f"it ended with {signal.Signals(killed).name}"
    else:
        ended.why = "it failed"
    return ended


def _said(reader: int) -> str:
    os.set_blocking(reader, False)
    chunks = []
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(reader, MAX_SAID):
            chunks.append(chunk)
    return b"".join(chunks)[-MAX_SAID:].decode(errors="replace")


def _address_space() -> int:
    """Bytes this process has mapped now (``/proc/self/statm``'s first field)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
