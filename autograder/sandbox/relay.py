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
- so does a message that takes what the kernel has sent in all past ``max_total`` bytes
  (the line ``flood-total <bytes>``): the grader parses every message it receives, whatever
  its parent, and a kernel that sent messages addressed to no request (which no output or
  reply bound counts) for as long as its cells may run kept a core of the grader's busy
  parsing them (outside attack 70: 30 MB displays for 25 s);
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

How a relay starts: forked from the worker's **relay server**, a process of its own that
the worker started once (``python -I -m`` this module ``--serve``), which has imported
zmq and has done nothing else: no zmq context, no thread, nothing of the worker's or any
student's in its memory. A Python started and zmq imported for every kernel was about
0.08 CPU s a submission; a fork of the server is about 0.01. The worker asks for a relay
on the server's socket, handing over the two pipe ends the relay reads its request from
and writes its lines to; the server forks, and hands back a pidfd of the child, through
which the worker polls and kills exactly that process (a pid could be reused once the
server reaps it). The server dies with the worker (``PR_SET_PDEATHSIG``, from a thread of
the worker's that lives as long as the worker) and each relay with the server, so no relay
outlives the grader that started it. A relay says why it ended on its own line (``flood``,
``cut``); one that says nothing died otherwise (a signal, its memory).
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
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


class _Server:
    """The worker's relay server (one per worker process), started on first use."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started: list = []
        ready = threading.Event()

        def keep() -> None:
            # The server's death signal follows the thread that started it: this one lives
            # as long as the worker, so the server (and every relay) ends with the worker
            # rather than with whichever grading thread first needed a relay.
            try:
                started.append(
                    subprocess.Popen(
                        [sys.executable, "-I", "-m", MODULE, "--serve", str(os.getpid())],
                        stdin=theirs.fileno(),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env={
                            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                            "MALLOC_ARENA_MAX": "2",
                        },
                        cwd="/",
                    )
                )
            except BaseException as exc:  # noqa: BLE001 - said by the thread that asked
                started.append(exc)
            ready.set()
            threading.Event().wait()

        threading.Thread(target=keep, daemon=True, name="relay-server").start()
        ready.wait()
        theirs.close()
        if isinstance(started[0], BaseException):
            ours.close()
            raise started[0]
        self.process, self.socket, self.lock = started[0], ours, threading.Lock()

    def fork(self, request_end: int, lines_end: int, memory: int) -> tuple[int, int]:
        """A new relay reading ``request_end`` and writing ``lines_end``, that may map
        ``memory`` bytes: its pid and pidfd."""
        with self.lock:
            socket.send_fds(self.socket, [b"fork %d" % memory], [request_end, lines_end])
            ready, _, _ = select.select([self.socket], [], [], START_WAIT)
            if not ready:
                raise RuntimeError("the relay server did not answer")
            said, fds, _, _ = socket.recv_fds(self.socket, 16, 1)
        for fd in fds:
            os.set_inheritable(fd, False)
        if not said and not fds:
            raise ConnectionError("the relay server ended")
        if len(fds) != 1 or not said.isdigit():
            for fd in fds:
                os.close(fd)
            raise RuntimeError("the relay server could not start a relay")
        return int(said), fds[0]


_SERVERS: dict[int, _Server] = {}  # this process's id -> its server (a fork gets its own)
_SERVERS_LOCK = threading.Lock()


def _fork_relay(request_end: int, lines_end: int, memory: int) -> tuple[int, int]:
    """Fork a relay from this process's server (started, or started again, as needed)."""
    for attempt in (1, 2):
        with _SERVERS_LOCK:
            server = _SERVERS.get(os.getpid())
            if server is not None and server.process.poll() is not None:
                server.socket.close()
                server = None
            if server is None:
                server = _SERVERS[os.getpid()] = _Server()
        try:
            return server.fork(request_end, lines_end, memory)
        except OSError:  # the server is gone (killed): a new one, once
            with _SERVERS_LOCK:
                if _SERVERS.get(os.getpid()) is server:
                    del _SERVERS[os.getpid()]
            server.socket.close()
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class Relay:
    """The grader's handle on one kernel's relay."""

    def __init__(self, folder: Path, max_bytes: int, max_total: int):
        """Fork the relay from the worker's relay server: it is ready for ``connect`` at
        once. It has its memory limit and its death with the server before it reads
        anything (``_confine``)."""
        folder.mkdir(mode=0o700)
        self.ip = str(folder / "ipc")
        self.max_bytes = max_bytes
        self.max_total = max_total
        request_read, request_write = os.pipe()
        lines_read, lines_write = os.pipe()
        try:
            self.pid, self.pidfd = _fork_relay(request_read, lines_write, memory_limit(max_bytes))
        except BaseException:
            for fd in (request_read, request_write, lines_read, lines_write):
                os.close(fd)
            raise
        os.close(request_read)
        os.close(lines_write)
        self.stdin = os.fdopen(request_write, "wb")
        self.stdout = os.fdopen(lines_read, "rb", buffering=0)

    def connect(self, kernel_ip: str, ports: dict) -> str:
        """Connect to the kernel's sockets at ``kernel_ip`` (a host path, resolved before
        any notebook code ran) and bind the grader's side; return where the grader's
        client connects."""
        request = {
            "kernel_ip": kernel_ip,
            "relay_ip": self.ip,
            "ports": ports,
            "max_bytes": self.max_bytes,
            "max_total": self.max_total,
        }
        self.stdin.write((json.dumps(request) + "\n").encode())
        self.stdin.close()
        ready, _, _ = select.select([self.stdout], [], [], START_WAIT)
        line = self.stdout.readline() if ready else b"(no answer)"
        if line != b"ready\n":
            self.stop()
            raise RuntimeError(f"the kernel's relay did not start ({line[:200]!r})")
        return self.ip

    def running(self) -> bool:
        """Whether the relay's process is still there (its pidfd turns readable when it
        ends)."""
        if self.pidfd < 0:
            return False
        ready, _, _ = select.select([self.pidfd], [], [], 0)
        return not ready

    def ended(self) -> str | None:
        """None while it runs; else why the kernel can no longer be read, in words."""
        if self.running():
            return None
        if not hasattr(self, "_why"):
            # What it said before it ended (a process forked meanwhile by another thread of
            # the worker may still hold the pipe's other end: never wait for its end).
            os.set_blocking(self.stdout.fileno(), False)
            try:
                parts = (self.stdout.read(200) or b"").split()
            except OSError:
                parts = []
            limit = f"{self.max_bytes / 1e6:g} MB"
            if len(parts) == 2 and parts[0] == b"flood" and parts[1].isdigit():
                self._why = (
                    f"it sent a message of {int(parts[1]) / 1e6:.0f} MB (or of more "
                    f"than {MAX_FRAMES} frames); the grader takes {limit} at most"
                )
            elif len(parts) == 2 and parts[0] == b"flood-total" and parts[1].isdigit():
                self._why = (
                    f"it sent more than {self.max_total / 1e6:g} MB in all (outputs, "
                    "answers and any other messages), the most the grader reads from a kernel"
                )
            else:
                channel = (
                    parts[1].decode(errors="replace")
                    if len(parts) == 2 and parts[0] == b"cut"
                    else "a"
                )
                self._why = (
                    f"its {channel} channel broke: it sent more at once than the "
                    f"grader holds for a kernel (messages of {limit} at most), or "
                    "closed its socket"
                )
        return self._why

    def stop(self) -> None:
        if self.pidfd >= 0:
            if self.running():
                try:
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                select.select([self.pidfd], [], [], START_WAIT)
            os.close(self.pidfd)
            self.pidfd = -1
        self.stdout.close()
        if not self.stdin.closed:
            self.stdin.close()


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


def _forward(zmq, pairs, max_bytes: int, max_total: int) -> None:
    pending: dict = {}  # socket -> frames it has yet to take
    sent = 0  # bytes the kernel has sent in all
    kernel_side = {back for back, *_ in pairs}
    monitors = {monitor: channel for _, _, monitor, channel in pairs}
    route = {}
    for back, front, *_ in pairs:
        route[back], route[front] = front, back
    # One poller: a source is left out only while its target has not taken the last
    # message (so the relay never holds more than one message per direction).
    poller = zmq.Poller()
    for source in [*monitors, *route]:
        poller.register(source, zmq.POLLIN)
    while True:
        for source, _ in poller.poll(10 if pending else 1000):
            if source in monitors:
                _end(f"cut {monitors[source]}", CUT)
            frames = source.recv_multipart(copy=False)
            if source in kernel_side:
                size = sum(len(f) for f in frames)
                if size > max_bytes or len(frames) > MAX_FRAMES:
                    _end(f"flood {size}", FLOODED)
                sent += size
                if sent > max_total:
                    _end(f"flood-total {sent}", FLOODED)
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


def _confine(limit: int, server: int) -> None:
    """Before anything is read: the memory cap, and SIGKILL when the server that forked
    this relay ends (or at once, if it has ended already)."""
    from autograder.sandbox.procs import die_with_parent

    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    die_with_parent(server)


def _relay(zmq) -> None:
    """A relay's life once confined: its request on standard input, then forwarding."""
    request = json.loads(sys.stdin.readline())
    context = zmq.Context()
    context.setsockopt(zmq.RECONNECT_IVL, -1)  # the path to the kernel is resolved once
    context.setsockopt(zmq.LINGER, 0)
    context.setsockopt(zmq.RCVHWM, QUEUE)
    context.setsockopt(zmq.SNDHWM, QUEUE)
    pairs = _sockets(zmq, context, request)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    _forward(zmq, pairs, request["max_bytes"], request["max_total"])


def _child(zmq, requests: socket.socket, fds: list[int], limit: int, server: int) -> None:
    """In the forked relay: confined first, then its two pipe ends become its standard
    input and output."""
    try:
        _confine(limit, server)
        requests.close()
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.stdin = os.fdopen(0, "r", closefd=False)
        sys.stdout = os.fdopen(1, "w", closefd=False)
        _relay(zmq)
    finally:
        os._exit(1)


def _reap(signum, frame) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(worker: int) -> None:
    """The relay server: fork one relay per request on standard input (a socket), until
    the worker closes it; each answer is the new relay's pidfd."""
    from autograder.sandbox.procs import die_with_parent

    die_with_parent(worker)
    import gc

    import zmq  # what every relay needs, imported once; no context: no thread here

    gc.freeze()
    requests = socket.socket(fileno=0)
    signal.signal(signal.SIGCHLD, _reap)
    me = os.getpid()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(requests, 64, 2)
        except InterruptedError:
            continue
        if not message:  # the worker closed its end
            return
        words = message.split()
        if len(fds) != 2 or len(words) != 2 or words[0] != b"fork" or not words[1].isdigit():
            for fd in fds:
                os.close(fd)
            requests.send(b"no")
            continue
        # SIGCHLD held from the fork until the pidfd is open: a relay that ended at once
        # is not reaped before then, so its pid (a zombie's) is still its own.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            _child(zmq, requests, fds, int(words[1]), me)
        for fd in fds:
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        try:
            socket.send_fds(requests, [b"%d" % pid], [pidfd])
        finally:
            os.close(pidfd)


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))


if __name__ == "__main__":
    main()
