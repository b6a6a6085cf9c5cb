"""What /proc says of a process, read without psutil, and a process's death with its
parent: the student-kernel template and the relay use them, where every import costs."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """This process gets SIGKILL when its parent (the thread that started it) ends; with
    ``parent``, it ends at once if that parent has ended already."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def live_threads(pid: int) -> bool:
    """Whether a process has a thread that is not a zombie. A process whose first thread
    ended on its own (a raw ``exit`` system call) shows as a zombie while its other
    threads run on: killing it ends them all."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X", "x"):
            return True
    return False


def started(pid: int) -> str:
    """When a process started, in clock ticks since boot, as /proc says it: with its pid,
    what tells it from a later process given the same pid ("" once it has ended, a zombie
    included)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return ""
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return ""
    return fields[19].decode()
