"""The relay: the one process that receives what a student's kernel sends, before the
grader does.

Threat model. The kernel runs the student's code, so it can send anything on its five
sockets, with any number of frames. zmq hands a receiver a message only once every frame
of it has arrived, so whoever receives a kernel's message holds all of it first, however
many frames it has; ``ZMQ_MAXMSGSIZE`` bounds one frame, not a message, and a receive
queue (``ZMQ_RCVHWM``) counts messages, not bytes. A message of 60 frames of 50 MB once
put 3 GB into the grader's own process. So the grader never receives from a student's
kernel directly:

- the relay connects to the kernel's sockets (on the path the grader found before any
  notebook code ran, never reconnecting) and binds a socket of the same kind for each in
  a folder of the grader's own, to which the grader's client connects;
- it forwards every message frame for frame, untouched: it holds no key and reads no
  content, so it trusts nothing it forwards and the grader checks each signature as before;
- a message from the kernel larger than ``max_bytes`` in all, or of more than
  ``MAX_FRAMES`` frames, ends the relay with the line ``flood <bytes>`` and exit status
  ``FLOODED``; nothing of it reaches the grader;
- the relay's own memory is capped (``RLIMIT_DATA``): a message too large to hold, or a
  queue of them, makes zmq's allocation fail; zmq then drops that connection (which it
  never makes again), and the relay ends with the line ``cut <channel>`` and status
  ``CUT``, as it does for any connection to the kernel that ends (or dies itself, if
  Python's own allocation fails): the grader's memory is never the one that runs out;
- it sends to the grader only what the grader's socket will take now (no drop, no wait):
  a grader that reads slowly stops the relay reading from that kernel socket, and the
  kernel's own side queues in the kernel's own, limited memory.

The grader's side (``Relay``) starts it, asks whether it ended (``ended``, in words: the
watchdog then kills a kernel still running and records ``Kind.FLOOD``) and kills it with
the kernel.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
from pathlib import Path

MODULE = __spec__.name if __spec__ is not None else __name__  # for python -m; follows a move
FLOODED = 3
CUT = 4
MAX_FRAMES = 1000
# Messages a relay's socket queues towards the grader, or from the kernel, before it
# stops reading: with the one it holds, the relay never holds more than
# (2 * QUEUE + 2) messages of at most max_bytes.
QUEUE = 2
# The relay's own heap besides the messages it holds: Python, pyzmq, zmq's threads.
BASE_MEMORY = 256_000_000
START_WAIT = 30  # seconds
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")


def memory_limit(max_bytes: int) -> int:
    """Bytes of writable private memory (RLIMIT_DATA) the relay may map."""
    return BASE_MEMORY + (2 * QUEUE + 2) * max_bytes


class Relay:
    """The grader's handle on one kernel's relay."""

    def __init__(self, folder: Path, max_bytes: int):
        """Start the relay's process: it imports zmq while the kernel starts, and waits
        for ``connect`` to say where the kernel's sockets are. It is spawned without a
        ``preexec_fn`` (so ``subprocess`` uses vfork, never a copy of the grading process:
        about 17 ms of CPU a kernel less); it sets its own memory limit and its death with
        the grader's thread (``_confine``) before it reads anything."""
        folder.mkdir(mode=0o700)
        self.ip = str(folder / "ipc")
        self.max_bytes = max_bytes
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MALLOC_ARENA_MAX": "2"}
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-m", MODULE, str(memory_limit(max_bytes)), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdout = self.process.stdout

    def connect(self, kernel_ip: str, ports: dict) -> str:
        """Connect to the kernel's sockets at ``kernel_ip`` (a host path, resolved before
        any notebook code ran) and bind the grader's side; return where the grader's
        client connects."""
        request = {
            "kernel_ip": kernel_ip,
            "relay_ip": self.ip,
            "ports": ports,
            "max_bytes": self.max_bytes,
        }
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.close()
        ready, _, _ = select.select([self.stdout], [], [], START_WAIT)
        line = self.stdout.readline() if ready else b"(no answer)"
        if line != b"ready\n":
            self.stop()
            raise RuntimeError(f"the kernel's relay did not start ({line[:200]!r})")
        return self.ip

    def ended(self) -> str | None:
        """None while it runs; else why the kernel can no longer be read, in words."""
        status = self.process.poll()
        if status is None:
            return None
        if not hasattr(self, "_why"):
            parts = (self.stdout.read(200) or b"").split()
            limit = f"{self.max_bytes / 1e6:g} MB"
            if status == FLOODED and len(parts) == 2 and parts[1].isdigit():
                self._why = (
                    f"it sent a message of {int(parts[1]) / 1e6:.0f} MB (or of more "
                    f"than {MAX_FRAMES} frames); the grader takes {limit} at most"
                )
            else:
                channel = (
                    parts[1].decode(errors="replace") if status == CUT and len(parts) == 2 else "a"
                )
                self._why = (
                    f"its {channel} channel broke: it sent more at once than the "
                    f"grader holds for a kernel (messages of {limit} at most), or "
                    "closed its socket"
                )
        return self._why

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stdout.close()
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()


def _sockets(zmq, context, request: dict) -> list[tuple]:
    """(from the kernel, to the grader) socket pairs, connected and bound."""
    kinds = {
        "shell": (zmq.DEALER, zmq.ROUTER),
        "control": (zmq.DEALER, zmq.ROUTER),
        "stdin": (zmq.DEALER, zmq.ROUTER),
        "hb": (zmq.DEALER, zmq.ROUTER),
        "iopub": (zmq.XSUB, zmq.XPUB),
    }
    pairs = []
    for channel in CHANNELS:
        port = request["ports"][channel]
        back_kind, front_kind = kinds[channel]
        back, front = context.socket(back_kind), context.socket(front_kind)
        if back_kind == zmq.DEALER:
            # One identity for shell and stdin: the kernel answers input on stdin to the
            # identity its shell request came from.
            back.setsockopt(zmq.ROUTING_ID, b"relay")
            front.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a full queue says so, never drops
        else:
            front.setsockopt(zmq.XPUB_NODROP, 1)
        # zmq drops a connection whose message it cannot hold (its allocation failed
        # under RLIMIT_DATA): the monitor says so, the relay ends.
        monitor = back.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        back.connect(f"ipc://{request['kernel_ip']}-{port}")
        front.bind(f"ipc://{request['relay_ip']}-{port}")
        pairs.append((back, front, monitor, channel))
    return pairs


def _end(line: str, status: int) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    os._exit(status)


def _forward(zmq, pairs, max_bytes: int) -> None:
    pending: dict = {}  # socket -> frames it has yet to take
    kernel_side = {back for back, *_ in pairs}
    monitors = {monitor: channel for _, _, monitor, channel in pairs}
    route = {}
    for back, front, *_ in pairs:
        route[back], route[front] = front, back
    # One poller: a source is left out only while its target has not taken the last
    # message (so the relay never holds more than one message per direction).
    poller = zmq.Poller()
    for socket in [*monitors, *route]:
        poller.register(socket, zmq.POLLIN)
    while True:
        for source, _ in poller.poll(10 if pending else 1000):
            if source in monitors:
                _end(f"cut {monitors[source]}", CUT)
            frames = source.recv_multipart(copy=False)
            if source in kernel_side:
                size = sum(len(f) for f in frames)
                if size > max_bytes or len(frames) > MAX_FRAMES:
                    _end(f"flood {size}", FLOODED)
            pending[route[source]] = frames
            poller.unregister(source)
        for target, frames in list(pending.items()):
            try:
                target.send_multipart(frames, flags=zmq.DONTWAIT, copy=False)
            except zmq.Again:
                continue
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EHOSTUNREACH:  # the grader's client is gone: drop it
                    raise
            del pending[target]
            poller.register(route[target], zmq.POLLIN)


def _confine(limit: int, grader: int) -> None:
    """Before anything is read: the memory cap, and SIGKILL when the grader's thread that
    started this process ends (or at once, if the grader has ended already)."""
    from autograder.sandbox.procs import die_with_parent

    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    die_with_parent(grader)


def main() -> None:
    _confine(int(sys.argv[1]), int(sys.argv[2]))
    import zmq

    request = json.loads(sys.stdin.readline())
    context = zmq.Context()
    context.setsockopt(zmq.RECONNECT_IVL, -1)  # the path to the kernel is resolved once
    context.setsockopt(zmq.LINGER, 0)
    context.setsockopt(zmq.RCVHWM, QUEUE)
    context.setsockopt(zmq.SNDHWM, QUEUE)
    pairs = _sockets(zmq, context, request)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    _forward(zmq, pairs, request["max_bytes"])


if __name__ == "__main__":
    main()
