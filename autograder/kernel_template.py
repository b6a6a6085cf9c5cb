"""A test kernel's template: one process that imports what every test kernel needs, never
runs a cell, and forks a fresh test kernel for each submission.

Runs inside the test kernel's sandbox, after ``autograder.kernel_entry`` has applied the
limits, dropped root and entered the second bubblewrap: its limits and identity are
already the kernel's, and every child inherits them. It imports ipykernel, IPython,
torch, NumPy and the grader's trusted side, so that a test kernel no longer pays for them
per submission (``import torch`` alone is about 1.6 CPU s).

Contract (the host's side is ``autograder.testkernel``):
- The template says ``ready`` on its standard output (a pipe to the host) once it has
  imported what it preloads.
- The host writes one request a line on the template's standard input, a JSON object
  ``{"connection": {...}}``: a Jupyter connection file's contents (ipc transport, new
  ports and a new key for every child). Only the grader holds that pipe.
- For each request the template forks one child. The child empties the sandbox's
  writable folders (``/tmp``, ``/dev/shm``: whatever an earlier child left), fills its
  working folder from the read-only staging folder, writes its connection file and
  becomes an ipykernel. It serves one submission and is killed by the host after it.
- Nothing of a child reaches the template or a later child: memory is the template's,
  copy-on-write; the files are emptied before each child starts; the template never
  reads anything a child wrote. So no process ever holds two submissions' data.
- Fork safety: the template starts no thread (torch's and OpenMP's pools, zmq contexts
  are made only in the child; ``OMP_NUM_THREADS=1`` keeps torch's import from starting
  one). Before each fork it checks that it has one thread; if not, it exits with
  ``UNSAFE_TO_FORK``, and the host starts test kernels without a template and says so.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys

from autograder.kernel_entry import STAGING_DIR, UNSAFE_TO_FORK, WORK_DIR, fill_work_dir

# What the template imports before its first fork: every test kernel imports these.
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "IPython", "numpy", "torch",
           "torch.nn.functional", "autograder.test_side", "autograder.plaindata")
WRITABLE = ("/tmp", "/dev/shm")


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def serve() -> None:
    """Fork one kernel per request line until the host closes the pipe."""
    preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its kernels are reaped as they end
    os.write(1, b"ready\n")  # to the host, on a pipe of its own
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            break
        if threads() != 1:
            sys.stderr.write(f"kernel_template: {threads()} threads; forking is not safe\n")
            sys.stderr.flush()
            os._exit(UNSAFE_TO_FORK)
        request = json.loads(line)
        if os.fork() == 0:
            try:
                _become_kernel(request["connection"])
            finally:
                os._exit(1)
    os._exit(0)


def _become_kernel(connection: dict) -> None:
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # a kernel waits for its own children
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the template's requests and its pipe to the host are not the kernel's
    os.close(null)
    os.dup2(2, 1)  # the kernel's own output goes to the log, as any kernel's
    for folder in WRITABLE:
        _empty(folder)
    path = os.path.join(os.path.dirname(connection["ip"]), "kernel.json")
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(connection, f)
    fill_work_dir(STAGING_DIR, WORK_DIR)
    os.environ.pop("JPY_PARENT_PID", None)
    from ipykernel import kernelapp

    # As nbclient starts every kernel: no history file (a new sqlite database per kernel).
    sys.argv = ["ipykernel_launcher", "-f", path, "--HistoryManager.hist_file=:memory:"]
    kernelapp.launch_new_instance()


def _empty(folder: str) -> None:
    """Remove everything in ``folder`` (never following a link)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass
