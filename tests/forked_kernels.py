"""Plain nbgrader's kernels for the test classes, forked from one process that has already
imported ipykernel, NumPy and torch: a measure of the suite's speed, nothing of the grader.

Why: `test_nbgrader_grading` has plain nbgrader grade about 90 notebooks, and each of nbgrader's
own kernels starts an interpreter, ipykernel and `import torch` (and, in the units whose tests
build an optimizer, `torch._dynamo`): about 3 of the 4-5 CPU s each notebook costs.

What stays plain: nbgrader's own `autograde` and its Execute preprocessor, one kernel a
notebook, the hidden tests in the learner's kernel, each kernel a fresh ipykernel of its own
that has run no cell before the notebook's first (it is forked from a process that imported
modules and never ran a cell; a name the learner did not bind is still undefined). What
differs: `sys.modules` holds those modules from the start, as after an `import`. The
students named in `STOCK` (each unit's solution and the unmodified release) are graded by
ipykernel's own launcher in the same run, so nbgrader's stock kernel stays tested.

Contract:
- `Zygote(folder)` starts this file as `serve SOCKET`: it imports `PRELOAD`, says ``ready``
  on its standard output and forks a kernel for each connection to SOCKET; it ends when its
  standard input closes (the test process's end, however it ends).
- `kernel_dir(folder, socket)` writes a `python3` kernelspec whose command is this file's
  `launch` (standard library only): it sends the zygote its argv, working folder,
  environment and file descriptors 0-2, then lives as long as the kernel, so that
  jupyter_client's process handling (wait, SIGINT for an interrupt, SIGKILL) reaches the
  kernel: a SIGINT is passed on, and the kernel kills itself when the launcher is gone.
  Each launch is a line of `LAUNCHES` in the zygote's folder.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

PRELOAD = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "IPython",
    "numpy",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.utils.data",
    "torch._dynamo",  # what a test's optimizer imports on its first step (torch._disable_dynamo)
)
STOCK = ("solution", "unmodified_release")
LAUNCHES = "launches.log"  # beside the socket: "stock|forked <the kernel's folder>" a kernel
_HEADER = 8  # bytes of a request's length


def serve(path: str) -> None:
    sys.path.pop(0)  # tests/, which a kernel's imports must not see
    gc.disable()
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # a kernel's collections never walk (and copy) the zygote's objects
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # kernels reaped by the system
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([server, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return  # the test process is gone
        if server in ready:
            conn, _ = server.accept()
            if os.fork() == 0:
                server.close()
                _become_kernel(conn)
            conn.close()


def _become_kernel(conn: socket.socket) -> None:
    """The forked child: never returns to the zygote's loop (SystemExit ends it)."""
    code = 70
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        size = int.from_bytes(data[:_HEADER], "big")
        while len(data) < _HEADER + size:
            more = conn.recv(1 << 20)
            if not more:
                raise EOFError("the launcher's request ended early")
            data += more
        request = json.loads(data[_HEADER:])
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path.insert(0, os.getcwd())  # as `python -m ipykernel_launcher` started here has it
        threading.Thread(target=_follow_launcher, args=(conn,), daemon=True).start()
        gc.enable()
        sys.argv = ["ipykernel_launcher", *request["argv"]]
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else int(end.code is not None)
    except BaseException as error:  # noqa: BLE001 - a kernel that cannot start says why
        print(f"forked kernel: {error!r}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def _follow_launcher(conn: socket.socket) -> None:
    """An interrupt the launcher passes on; the launcher's end is the kernel's."""
    while data := conn.recv(64):
        for _ in data:
            os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGKILL)


def launch(path: str, argv: list[str]) -> None:
    stock = Path.cwd().parent.name in STOCK
    with open(Path(path).with_name(LAUNCHES), "a") as log:  # one short line: one write
        log.write(f"{'stock' if stock else 'forked'} {os.getcwd()}\n")
    if stock:
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [len(request).to_bytes(_HEADER, "big") + request], [0, 1, 2])
    signal.signal(signal.SIGINT, lambda *_: conn.send(b"i"))
    while conn.recv(64):
        pass
    os._exit(0)


class Zygote:
    def __init__(self, folder: Path, env: dict[str, str]):
        self.socket = str(folder / "zygote.sock")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "serve", self.socket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.close()
            raise RuntimeError(f"the kernels' zygote did not start (it said {line!r})")

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def kernel_dir(folder: Path, zygote: Zygote) -> Path:
    """A Jupyter data folder (for JUPYTER_PATH) whose `python3` kernel is forked from
    ``zygote``."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-I", "-S", __file__, "launch", zygote.socket, "{connection_file}"]
    spec_json = {"argv": argv, "display_name": "Python 3 (forked)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(spec_json))
    return folder


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] == "launch":
        launch(sys.argv[2], ["-f", sys.argv[3]])
