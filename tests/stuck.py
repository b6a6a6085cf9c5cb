"""A course-grade run with a deadline that says where it was stuck (no pytest here).

``run(cmd, timeout)`` is ``subprocess.run(cmd, capture_output=True, text=True)``; past
``timeout`` it asks every process of the run that catches SIGUSR2 (the coordinator and
its workers: ``autograder.logs``; never a kernel or multiprocessing's helpers, which
SIGUSR2 would kill) for its threads' stacks, kills the run, and fails with them and the
process tree. Set the timeout under pytest-timeout's, so that this message is the one
a CI log shows, not pytest's stack of the waiting test.
"""

from __future__ import annotations

import signal
import subprocess
import time

import psutil

CATCHES_USR2 = 1 << (signal.SIGUSR2 - 1)


def run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = _tree(process.pid)
        for p in tree:
            if _catches_usr2(p.pid):
                p.send_signal(signal.SIGUSR2)
        time.sleep(3)
        listing = "\n".join(_line(p) for p in tree)
        for p in tree:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        out, err = process.communicate()
        raise AssertionError(
            f"{' '.join(cmd[:2])} did not finish in {timeout:g} s. Its processes:\n{listing}\n"
            f"Its stderr (the stacks last):\n{err[-12000:]}"
        ) from None
    return subprocess.CompletedProcess(cmd, process.returncode, out, err)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _catches_usr2(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(line for line in f if line.startswith("SigCgt:"))
        return bool(int(caught.split()[1], 16) & CATCHES_USR2)
    except (OSError, StopIteration, ValueError):
        return False


def _line(p: psutil.Process) -> str:
    try:
        with p.oneshot():
            return (
                f"{p.pid} ppid {p.ppid()} {p.status()} cpu {sum(p.cpu_times()[:2]):.1f}s "
                f"{' '.join(p.cmdline())[:160]}"
            )
    except psutil.Error:
        return f"{p.pid} (gone)"
