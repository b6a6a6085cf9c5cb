"""A kernel template: one process that imports what every kernel of its kind needs, never
runs a cell, and forks a fresh kernel for each submission.

Two kinds (``PRELOAD``): a **test** kernel's template and a **student** kernel's template.
Each runs inside its kernel's sandbox, after ``autograder.sandbox.kernel_entry`` has applied the
limits, dropped root and entered the second bubblewrap: its limits and identity are
already the kernel's, and every child inherits them. It imports ipykernel, IPython,
torch and NumPy (and, for a test kernel, the grader's trusted side), so that no kernel
pays for them per submission (``import torch`` alone is about 1.6 CPU s).

Contract (the host's side is ``autograder.worker.trusted_kernel``):
- The template says ``ready`` on its standard output (a pipe to the host) once it has
  imported what it preloads.
- The host writes one request a line on the template's standard input, a JSON object
  ``{"connection": {...}, "staging": NAME}``: a Jupyter connection file's contents (ipc
  transport, new ports and a new key for every child) and, optionally, the subfolder of
  the read-only staging folder that holds this submission's files. Only the grader
  holds that pipe.
- For each request the template forks one child. The child empties the sandbox's
  writable folders (``/tmp``, ``/dev/shm``: whatever an earlier child left), fills its
  working folder from the staging folder, writes its connection file and becomes an
  ipykernel. It serves one submission and is killed by the host after it, with every
  process it started (the host kills all of the template's tree but the template).
- When a child ends, the template says ``exit <pid> <status>`` on its standard output
  (the pid as the sandbox numbers it, the status as ``subprocess`` gives it), so that a
  kernel killed by its CPU limit is told apart from one that crashed.
- Nothing of a child reaches the template or a later child: memory is the template's,
  copy-on-write; the template is not dumpable (``PR_SET_DUMPABLE`` 0), so no child,
  which holds no capability, can ptrace it or open its ``/proc/<pid>/mem``; the files
  are emptied before each child starts; the template never reads anything a child
  wrote. A child can still signal the template (same uid, same pid namespace): that
  stops only the template, and the host starts a new one. So no process ever holds two
  submissions' data.
- Fork safety: the template starts no thread (torch's and OpenMP's pools, zmq contexts
  are made only in the child; ``OMP_NUM_THREADS=1`` keeps torch's import from starting
  one). Before each fork it checks that it has one thread; if not, it exits with
  ``UNSAFE_TO_FORK``, and the host starts test kernels without a template and says so.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import sys

from autograder.sandbox.kernel_entry import STAGING_DIR, UNSAFE_TO_FORK, WORK_DIR, fill_work_dir

_COMMON = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "IPython",
    "numpy",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.utils.data",
    "autograder.bridge.plaindata",
)
# What each kind of template imports before its first fork: what every kernel of that
# kind imports (a student's notebook starts with ``import torch``; the bridge's student
# side answers every test's call).
PRELOAD = {
    "test": _COMMON + ("autograder.bridge.trusted_side",),
    "student": _COMMON + ("autograder.bridge.student_side",),
}
WRITABLE = ("/tmp", "/dev/shm")
_STAGING_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PR_SET_DUMPABLE = 4


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def preload(kind: str) -> None:
    import importlib

    for name in PRELOAD[kind]:
        importlib.import_module(name)


def _reap(signum, frame) -> None:
    """Reap every ended kernel and tell the host how each ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            os.write(1, f"exit {pid} {os.waitstatus_to_exitcode(status)}\n".encode())
        except OSError:
            pass


def serve(kind: str = "test") -> None:
    """Fork one kernel per request line until the host closes the pipe."""
    preload(kind)
    # No child may ptrace the template or read its memory through /proc: it would reach
    # every later child from there.
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.stderr.write("kernel_template: could not make the template undumpable\n")
        os._exit(1)
    signal.signal(signal.SIGCHLD, _reap)
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
        staging = request.get("staging") or ""
        if staging and not _STAGING_NAME.fullmatch(staging):
            sys.stderr.write("kernel_template: a staging folder must be a plain name\n")
            continue
        if os.fork() == 0:
            try:
                _become_kernel(request["connection"], staging)
            finally:
                os._exit(1)
    os._exit(0)


def _become_kernel(connection: dict, staging: str = "") -> None:
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
    fill_work_dir(os.path.join(STAGING_DIR, staging) if staging else STAGING_DIR, WORK_DIR)
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
