"""What /proc says of a process, read without psutil: the student-kernel template reads it
inside the sandbox, where every import costs each fork's parent."""

from __future__ import annotations

import os


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
