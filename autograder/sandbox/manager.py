"""Kernel managers that start every grading kernel in the sandbox, and its watchdog.

jupyter_client's whole protocol stays; what changes is where the kernel runs and how
much the grader trusts the channel:

- the command becomes ``bwrap ... python -I -m autograder.sandbox.kernel_entry``
  (``autograder.sandbox.bubblewrap``), with the ``ipc`` transport: the sockets live in the kernel's
  own tmpfs, which the grader reaches through ``/proc/<pid>/root``, and the connection
  file is bound read-only; no host folder is writable by the kernel;
- the client connects once, after the kernel has made its sockets and before any
  notebook code runs, and never reconnects (``ZMQ_RECONNECT_IVL`` = -1): a kernel that
  later swaps a socket for a link cannot make the grader connect somewhere else. A
  message larger than ``Sandbox.max_message_mb`` cuts the kernel off
  (``ZMQ_MAXMSGSIZE``) instead of filling the grader's memory, and no send waits more
  than ``SEND_TIMEOUT_MS`` on a kernel that is gone;
- shutting a kernel down kills its whole process tree at once;
- a watchdog thread kills the kernel's whole process tree when its memory (resident
  memory plus what it keeps in its tmpfs folders) or its lifetime passes the limit. What
  it did is kept in ``events``, in memory: the host reads no file a kernel could touch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import zmq
import zmq.asyncio
from jupyter_client.blocking import BlockingKernelClient
from jupyter_client.manager import AsyncKernelManager, KernelManager
from jupyter_core.utils import run_sync
from traitlets import Bool, Integer, List, Unicode, default
from traitlets.config import Configurable

from autograder.fates import Event
from autograder.sandbox import cgroups, kernel_entry
from autograder.sandbox.bubblewrap import Sandbox
from autograder.sandbox.clients import ReadyClient
from autograder.sandbox.kernel_entry import (
    DIRS_ENV,
    LIMITS_ENV,
    NEST_ENV,
    PRELOAD_ENV,
    TEMPLATE_ENV,
    UID_ENV,
)
from autograder.sandbox.messages import BoundedSession
from autograder.sandbox.procs import die_with_parent, live_threads
from autograder.sandbox.relay import CHANNELS, Relay
from autograder.sandbox.watchdog import Watchdog, descendants, kill_tree

log = logging.getLogger(__name__)

SOCKET_WAIT = 60  # seconds a starting kernel has to make its sockets
WALL_MARGIN = 60  # s a template or a test kernel outlives a student kernel's wall time
SOCKETS_IN_SANDBOX = "/tmp/.kernel/ipc"  # the kernel's sockets: <this>-<port>, in its tmpfs
SEND_TIMEOUT_MS = 5000
# Messages a client socket holds unread: past it the kernel's own side queues (in its own,
# limited memory) and then drops. So one kernel, however fast it sends, can hold at most
# this many messages of at most Sandbox.max_message_mb in the grader.
RECEIVE_QUEUE = 2


_CONTEXTS: dict[tuple[int, bool], zmq.Context] = {}


def guarded_context(max_message_bytes: int, asynchronous: bool) -> zmq.Context:
    """A zmq context whose sockets never reconnect, refuse oversized messages and hold at
    most ``RECEIVE_QUEUE`` unread messages (a kernel flooding its output is throttled in
    its own memory, never in the grader's).

    One per process and kind, kept for the process's life: every client closes its own
    sockets, and ending a context after each kernel blocked the grader 0.3-0.5 s per
    submission in zmq_ctx_term, with no socket left open.
    """
    key = (max_message_bytes, asynchronous)
    if key not in _CONTEXTS or _CONTEXTS[key].closed:
        context = zmq.asyncio.Context() if asynchronous else zmq.Context()
        context.setsockopt(zmq.RECONNECT_IVL, -1)
        context.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
        context.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE)
        context.setsockopt(zmq.LINGER, 0)  # a closing client never waits on a kernel
        context.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)  # nor does a send to one that is gone
        _CONTEXTS[key] = context
    return _CONTEXTS[key]


def die_with_grader():
    """A Popen preexec_fn: the child gets SIGKILL when the grader's thread that started it
    ends, and never runs at all if the grader ended first. Set in the child before its
    first exec, so no moment is left (as ``setpriv --pdeathsig`` after exec left one) in
    which a grader killed mid-launch orphans a kernel that no watchdog limits any more."""
    parent = os.getpid()

    def preexec() -> None:
        die_with_parent(parent)

    return preexec


class SandboxMixin(Configurable):
    """The parts shared by the async manager (nbclient) and the sync one (test kernel).

    Configure it as ``SandboxMixin.<trait>`` to reach both managers.
    """

    use_bwrap = Bool(True, help="Run the kernel under bubblewrap.").tag(config=True)
    uid = Integer(-1, help="As root: the uid the kernel runs as (-1: not root).").tag(config=True)
    runtime_root = Unicode(
        "", help="Host folder (short path) for the kernel's connection file and log."
    ).tag(config=True)
    staging = Unicode(
        "", help="Host folder of regular files copied into the kernel's working folder."
    ).tag(config=True)
    extra_env = List(Unicode(), help="NAME=VALUE pairs added to the kernel's environment.").tag(
        config=True
    )
    slot = Integer(0, help="The grading thread's slot: its own student-kernel template.").tag(
        config=True
    )
    template = Unicode(
        "",
        help="A kind of kernel ('test', 'student'): start that kind's "
        "template (autograder.sandbox.kernel_template), which forks one kernel per "
        "request, instead of a kernel.",
    ).tag(config=True)
    preload = List(
        Unicode(),
        help="More modules the template imports before its first fork: "
        "Sandbox.template_preload for the assignment being graded.",
    ).tag(config=True)

    trusted = Bool(
        False,
        help="A test kernel: its wall-time limit is the sandbox's plus "
        "WALL_MARGIN, so that a student's kernel, which it waits on, always "
        "reaches its own first.",
    ).tag(config=True)

    relayed = Bool(
        False,
        help="Read the kernel only through a relay process of its own "
        "(autograder.sandbox.relay): a student's kernel.",
    ).tag(config=True)

    _watchdog: Watchdog | None = None
    _relay: Relay | None = None

    def _sandbox(self) -> Sandbox:
        return Sandbox(config=self.config)

    def _context_default(self):
        return guarded_context(
            self._sandbox().max_message_mb * 1_000_000,
            asynchronous=isinstance(self, AsyncKernelManager),
        )

    @default("session")
    def _bounded_session(self):
        return BoundedSession(parent=self)

    def client(self, **kwargs):
        kwargs.setdefault(
            "context",
            guarded_context(
                self._sandbox().max_message_mb * 1_000_000,
                asynchronous=isinstance(self, AsyncKernelManager),
            ),
        )
        return super().client(**kwargs)

    async def _async_pre_start_kernel(self, **kw):
        self.events: list[Event] = []
        # Without a runtime_root (a caller outside the pipeline) the folder is ours to
        # remove at shutdown.
        self._made_root = None if self.runtime_root else tempfile.mkdtemp(prefix="cg-", dir="/tmp")
        root = Path(tempfile.mkdtemp(prefix="k", dir=self.runtime_root or self._made_root))
        root.chmod(0o755)
        self._runtime_dir = root
        self._empty_staging = None
        if not self.staging:
            self._empty_staging = tempfile.mkdtemp(prefix="stage-", dir=root)
            os.chmod(self._empty_staging, 0o755)
        self.transport = "ipc"
        # In the sandbox the sockets live in the kernel's own tmpfs (its quota, no host
        # folder it can write); the grader reaches them through /proc/<pid>/root.
        self.ip = SOCKETS_IN_SANDBOX if self.use_bwrap else str(root / "ipc")
        self.connection_file = str(root / "kernel.json")
        # SIGINT to bwrap's process group never reaches the kernel in its own session;
        # ipykernel's interrupt_request (control channel) does.
        if self.kernel_spec is not None:
            self.kernel_spec.interrupt_mode = "message"
        result = await super()._async_pre_start_kernel(**kw)
        if self.uid >= 0:  # written here just now (0600): the kernel's uid must read it
            os.chown(self.connection_file, self.uid, self.uid)
        return result

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        sandbox = self._sandbox()
        extra = kernel_cmd[kernel_cmd.index("-f") + 2 :] if "-f" in kernel_cmd else []
        command = [
            sys.executable,
            "-I",
            "-m",
            kernel_entry.MODULE,
            "-f",
            self.connection_file,
            *extra,
        ]
        steps = {"uid": self.uid} if self.uid >= 0 else {}
        if self.use_bwrap:
            staging = Path(self.staging or self._empty_staging)
            # The connection file (the channel's key) is bound read-only.
            prefix, steps = sandbox.command(
                staging, [Path(self.connection_file)], self.uid, template=bool(self.template)
            )
            command = prefix + command
        # bwrap's --die-with-parent ends the kernel when bwrap dies; bwrap (or the
        # unsandboxed kernel) is tied to the grader from the fork on (die_with_grader).
        kw["preexec_fn"] = die_with_grader()
        self._group = None
        if self.use_bwrap and cgroups.unavailable() is None:
            self._group = cgroups.KernelGroup(sandbox.memory_mb * 1_000_000, sandbox.max_cpus)
            command = self._group.join_prefix() + command
        kw["env"] = self._kernel_env(sandbox, steps)
        kw["cwd"] = "/" if self.use_bwrap else str(self._runtime_dir)
        # Never the instructor's terminal, and never a file the kernel can reach: the
        # kernel's own stdout and stderr go to a log outside its sandbox, capped by
        # RLIMIT_FSIZE like any file it writes.
        self._log_path = self._runtime_dir / "kernel.log"
        log = open(self._log_path, "ab")
        kw["stdout"] = kw["stderr"] = log
        kw["stdin"] = subprocess.DEVNULL
        if self.template:  # its requests come on stdin; it says it is ready on stdout
            kw["env"][TEMPLATE_ENV] = self.template
            kw["env"][PRELOAD_ENV] = ",".join(self.preload)
            kw["stdin"] = kw["stdout"] = subprocess.PIPE
        try:
            await super()._async_launch_kernel(command, **kw)
        finally:
            log.close()
        watched = sandbox
        if self.template == "student":
            # Each forked kernel has a watchdog of its own, whose events are its
            # submission's; the template's keeps only the wall clock, so that it never
            # kills a kernel first and leaves that kernel's fate unsaid.
            # Its wall clock runs longer than a kernel's, which is restarted after it at
            # each fork: at the limit the kernel's own watchdog kills the kernel and says
            # so (before, the template's killed the template first: "did not say how").
            watched = Sandbox(
                config=self.config,
                memory_mb=0,
                max_processes=0,
                max_cpus=0,
                wall_seconds=sandbox.wall_seconds + WALL_MARGIN if sandbox.wall_seconds else 0,
            )
        elif self.trusted and sandbox.wall_seconds:
            # A test waits on the student's functions: a student who spends its wall
            # time there must meet the student kernel's limit, a verdict about the
            # submission, never the test kernel's (attack 19: both were killed at once,
            # and the grader's own failure, `error`, came back on every run).
            watched = Sandbox(config=self.config, wall_seconds=sandbox.wall_seconds + WALL_MARGIN)
        self._watchdog = Watchdog(self.provisioner.pid, watched, self.events, self._group)
        self._watchdog.start()
        if self.template:
            await self._wait_for_template()
        else:
            await self._wait_for_sockets()

    async def _wait_for_template(self) -> None:
        """Wait for the template's "ready" line (it has imported what it preloads), then
        note its own processes: every other process of its tree is a kernel it forked."""
        out = self.provisioner.process.stdout
        os.set_blocking(out.fileno(), False)
        deadline, said = time.monotonic() + SOCKET_WAIT, b""
        while time.monotonic() < deadline:
            try:
                said += os.read(out.fileno(), 64) or b""
            except BlockingIOError:
                pass
            if b"ready\n" in said:
                self._own_processes = _tree(self.provisioner.pid)
                self._template_root = None
                return
            if self.provisioner.process.poll() is not None:
                raise RuntimeError(f"the kernel template exited while starting: {self.start_log()}")
            await asyncio.sleep(0.02)
        raise RuntimeError(
            f"the kernel template was not ready in {SOCKET_WAIT} s: {self.start_log()}"
        )

    async def fork_kernel(self, connection: dict, staging: str = "") -> str:
        """Ask the template for a new kernel on ``connection`` (ipc ports and key that no
        kernel has had), its files from the staging folder's subfolder ``staging``, and
        wait for its sockets; return the host path of its ``ip``. Any kernel it forked
        before is killed first, with every process it started: one child at a time."""
        self.end_forked_kernels()
        self.template_said()
        forks = len(self.__dict__.get("_forked", []))
        stdin = self.provisioner.process.stdin
        request = {"connection": connection, **({"staging": staging} if staging else {})}
        stdin.write((json.dumps(request) + "\n").encode())
        stdin.flush()
        ports = [
            connection[k]
            for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
        ]
        return await self._sockets_of(
            connection["ip"],
            ports,
            "the forked kernel",
            skip=getattr(self, "_own_processes", None),
            failed=lambda: self._fork_failed(forks),
            shared_log=True,
            forked=lambda: len(self.__dict__.get("_forked", [])) > forks,
        )

    def _fork_failed(self, forks_before: int) -> bool:
        """Whether the child the template forked for the latest request has ended (the
        template says ``forked <n> <pid>``, then ``exit <n> <pid> <status> <cpu>``), or the
        template was stopped before it could fork: a process an earlier kernel left behind
        (same uid) sent it SIGSTOP, and the wait for the kernel's sockets lasted its whole
        60 s (outside attack 69)."""
        exits = self.template_said()
        forked = self.__dict__.get("_forked", [])
        return (len(forked) > forks_before and forked[-1][0] in exits) or self.template_stopped()

    def template_stopped(self) -> bool:
        """Whether one of the template's own processes is stopped or traced."""
        for p in (getattr(self, "_own_processes", None) or {}).values():
            try:
                if p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
                    return True
            except psutil.NoSuchProcess:
                continue
        return False

    def fork_number(self, pid: int) -> int | None:
        """The number of the template's latest fork whose child has ``pid`` in the sandbox.
        A pid alone is not enough: a kernel can use up the sandbox's pids until the next
        child gets an earlier child's pid (kernel_template)."""
        self.template_said()
        return next((n for n, p in reversed(self.__dict__.get("_forked", [])) if p == pid), None)

    def template_said(self) -> dict:
        """How the template's kernels ended, by their fork's number: what its
        ``exit N PID STATUS CPU`` lines said so far (read without waiting)."""
        exits = self.__dict__.setdefault("_exits", {})
        out = getattr(getattr(self.provisioner, "process", None), "stdout", None)
        if out is None:
            return exits
        said = self.__dict__.get("_said", b"")
        while True:
            try:
                chunk = os.read(out.fileno(), 4096)
            except (BlockingIOError, OSError, ValueError):
                break
            if not chunk:
                break
            said += chunk
        *lines, said = said.split(b"\n")
        self._said = said
        for line in lines:
            parts = line.split()
            try:
                if len(parts) == 5 and parts[0] == b"exit":
                    number, status, cpu = int(parts[1]), int(parts[3]), float(parts[4])
                    int(parts[2])  # the pid: only for people reading the log
                    exits[number] = status
                    self.__dict__.setdefault("_cpu", {})[number] = cpu
                elif len(parts) == 3 and parts[0] == b"forked":
                    fork = (int(parts[1]), int(parts[2]))
                    self.__dict__.setdefault("_forked", []).append(fork)
            except ValueError:  # not a line the template wrote: nothing is said by it
                log.warning("a kernel template wrote a line that is not its own: %r", line[:200])
        return exits

    def template_cpu(self) -> dict:
        """The CPU seconds each of the template's ended kernels used, by its fork's number."""
        self.template_said()
        return self.__dict__.get("_cpu", {})

    def forked_kernel(self) -> psutil.Process | None:
        """The kernel the template forked last (a child of the template itself)."""
        own = getattr(self, "_own_processes", None) or {}
        own_pids = {pid for pid, _ in own}
        for p in self.forked_kernels():
            try:
                if p.ppid() in own_pids:
                    return p
            except psutil.NoSuchProcess:
                continue
        return None

    def forked_kernels(self) -> list:
        """The running processes of the template's tree that are not the template's own."""
        own = getattr(self, "_own_processes", None) or {}
        pid = getattr(self.provisioner, "pid", None)
        return (
            [p for key, p in _tree(pid).items() if key not in own and is_running(p)] if pid else []
        )

    def end_forked_kernels(self) -> None:
        """Kill every kernel the template forked, and wait until they are gone."""
        procs = self.forked_kernels()
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        deadline = time.monotonic() + 5
        while any(is_running(p) for p in procs) and time.monotonic() < deadline:
            time.sleep(0.01)

    async def _wait_for_sockets(self) -> None:
        """Connect only once every socket exists: a client that never reconnects must not
        try before the kernel listens. Until then no notebook code has run, so the path to
        the sockets (through /proc/<pid>/root, into the sandbox) is still the grader's."""
        ports = (self.shell_port, self.iopub_port, self.stdin_port, self.control_port, self.hb_port)
        self.start_relay()
        self.ip = self.relay_from(await self._sockets_of(self.ip, ports, "the kernel"))
        self._own_processes = _tree(self.provisioner.pid)

    def start_relay(self) -> None:
        """Where ``relayed``: start the kernel's relay, which imports zmq meanwhile."""
        if self.relayed and self._relay is None:
            folder = self._runtime_dir / f"relay-{secrets.token_hex(4)}"
            sandbox = self._sandbox()
            self._relay = Relay(
                folder, sandbox.max_message_mb * 1_000_000, sandbox.max_sent_mb * 1_000_000
            )

    def relay_from(self, kernel_ip: str) -> str:
        """Where the grader's client connects to the kernel whose sockets are at
        ``kernel_ip`` (a host path): through the kernel's relay where ``relayed``."""
        if not self.relayed:
            return kernel_ip
        self.start_relay()
        ports = dict(
            zip(
                CHANNELS,
                (
                    self.shell_port,
                    self.iopub_port,
                    self.stdin_port,
                    self.control_port,
                    self.hb_port,
                ),
            )
        )
        ip = self._relay.connect(kernel_ip, ports)
        if self._watchdog is not None:
            self._watchdog.relay = self._relay
        return ip

    async def _sockets_of(
        self, inside: str, ports, what: str, skip=None, failed=None, shared_log=False, forked=None
    ) -> str:
        """The host path of ``inside`` (the kernel's ``ip`` in its sandbox) once a socket
        exists there for every port; an error if the process exits, ``failed()`` says the
        kernel ended, or time runs out. ``skip``: processes of the tree that are not the
        kernel (a template's own). ``shared_log``: the log is a template's, which every
        kernel it forked wrote to, earlier submissions' included: neither the error nor a
        warning quotes it (one student's words would reach another's report, or the
        instructor's terminal as the grader's own lines); --debug logs its end, escaped.
        ``forked()``: whether the template has said it forked the kernel; the tree is not
        walked before (a walk reads all of /proc, and a template cleans up after the
        kernel before for tens of ms: a walk every 10 ms meanwhile cost about 0.05 CPU s
        a submission)."""

        def said() -> str:
            if not shared_log:
                return self.start_log()
            log.debug(
                "%s did not start; its template's log ends (escaped): %r", what, self.start_log()
            )
            return "its template's log, which the kernels it forked write to too, is not quoted"

        deadline = time.monotonic() + SOCKET_WAIT
        root, namespace = None, 0
        while time.monotonic() < deadline:
            # The tree is walked until a process of the sandbox shows up, not on every look.
            if not self.use_bwrap:
                root = ""
            elif not _still_sandboxed(root, namespace) and (forked is None or forked()):
                root, namespace = _sandboxed_root(self.provisioner.pid, skip)
            if root is not None and all(_is_socket(f"{root}{inside}-{p}") for p in ports):
                return f"{root}{inside}"
            process = getattr(self.provisioner, "process", None)
            if (process is not None and process.poll() is not None) or (failed and failed()):
                raise RuntimeError(f"{what} exited while starting: {said()}")
            await asyncio.sleep(0.01)  # the test kernel's fork goes on meanwhile
        raise RuntimeError(f"{what} made no sockets in {SOCKET_WAIT} s: {said()}")

    def start_log(self, limit: int = 2000) -> str:
        """The end of the kernel's own log (written through a descriptor it was given)."""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                return f.read(limit).decode(errors="replace").strip()
        except (OSError, AttributeError):
            return ""

    def oom_killed(self) -> bool:
        """Whether its control group's OOM killer took one of the kernel's processes."""
        group = getattr(self, "_group", None)
        return group is not None and group.oom_kills() > 0

    def kill_strays(self) -> int:
        """SIGKILL every process the kernel's code started (all of its tree that was not
        there when its sockets appeared, before any notebook code ran), so that an
        interrupt reaches a kernel whose children hold its CPU share. How many."""
        own = getattr(self, "_own_processes", None)
        pid = getattr(self.provisioner, "pid", None)
        if own is None or not pid:
            return 0
        strays = [p for key, p in _tree(pid).items() if key not in own and is_running(p)]
        for p in strays:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        return len(strays)

    def restart_wall_clock(self) -> None:
        """Count the wall-time limit from now (a kernel reused for another task)."""
        if self._watchdog is not None:
            self._watchdog.restart_clock()

    def _kernel_env(self, sandbox: Sandbox, steps: dict) -> dict:
        # A fresh environment: nothing of the instructor's (tokens, paths) leaks in.
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
            # N kernels share the machine: one thread each keeps them from fighting.
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            LIMITS_ENV: json.dumps(sandbox.limits()),
        }
        for pair in self.extra_env:
            name, _, value = pair.partition("=")
            env[name] = value
        if "uid" in steps:
            env[UID_ENV] = str(steps["uid"])
        if "nest" in steps:
            env[NEST_ENV] = steps["nest"]
        if not self.use_bwrap:
            work = self._runtime_dir / "work"
            env[DIRS_ENV] = json.dumps(
                {"staging": self.staging or self._empty_staging, "work": str(work)}
            )
            env["HOME"] = str(work)
        return env

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False):
        """Kill the kernel's whole tree; never ask it politely first. A sandboxed kernel
        has nothing to save, and a request to one that is gone (or ignores it) would
        only wait."""
        self.shutting_down = True
        try:
            self.stop_watching()
            if self.provisioner is not None:
                await self.provisioner.wait()
            await self._async_cleanup_resources(restart=restart)
        finally:
            if getattr(self, "_group", None) is not None:
                self._group.remove()
            self.stop_watching()
            folder = getattr(self, "_made_root", None) or getattr(self, "_runtime_dir", None)
            if folder and not restart:
                # rmtree never follows a link, even one the kernel planted.
                shutil.rmtree(folder, ignore_errors=True)

    def release_group(self) -> None:
        """Remove the kernel's control group once its killed tree is gone: a template is
        ended here, not through shutdown_kernel, and each group left behind stays in the
        machine's kernel until reboot (a grading server leaked two per run)."""
        group = getattr(self, "_group", None)
        if group is None:
            return
        process = getattr(self.provisioner, "process", None)
        if process is not None:
            try:
                process.wait(timeout=2)  # reaped: nothing of the tree holds the group
            except Exception:  # noqa: BLE001 - a tree that outlives SIGKILL keeps its group
                return
        group.remove()
        self._group = None

    def stop_watching(self) -> None:
        if self._watchdog is not None and not self._watchdog.stopped.is_set():
            self._watchdog.stopped.set()
            self._watchdog.last_look()
        if self._relay is not None:
            self._relay.stop()
        if self.provisioner is not None and self.provisioner.pid:
            kill_tree(self.provisioner.pid)

    async def _async_kill_kernel(self, restart: bool = False):
        if self.provisioner is not None and self.provisioner.pid:
            kill_tree(self.provisioner.pid)
        await super()._async_kill_kernel(restart=restart)


def discard(km, folder) -> None:
    """End a kernel or a template for good: its whole tree killed (``stop_watching``), its
    host folder removed (rmtree never follows a link)."""
    if km is not None:
        km.stop_watching()
        km.release_group()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _tree(pid: int) -> dict:
    """A process and its descendants, keyed by (pid, start time): a pid reused later is
    another process."""
    try:
        root = psutil.Process(pid)
        procs = [root] + descendants(root)
    except psutil.NoSuchProcess:
        return {}
    tree = {}
    for p in procs:
        try:
            tree[(p.pid, p.create_time())] = p
        except psutil.NoSuchProcess:
            continue
    return tree


def is_running(p: psutil.Process) -> bool:
    """Whether a process still runs: not ended, and not a zombie, unless it is a zombie
    only in name (its first thread ended on its own while others run on)."""
    try:
        if p.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    return live_threads(p.pid)


def _sandboxed_root(pid: int, skip=None) -> tuple[str | None, int]:
    """/proc/<pid>/root of a process of the kernel's tree that lives in the sandbox's
    mount namespace (not bwrap itself, nor a process in ``skip``: a template's own),
    and that namespace; None before there is one."""
    ours = os.stat("/proc/self/ns/mnt").st_ino
    skipped = {pid for pid, _ in (skip or {})}
    try:
        children = descendants(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return None, 0
    for child in children:
        if child.pid in skipped:
            continue
        try:
            namespace = os.stat(f"/proc/{child.pid}/ns/mnt").st_ino
        except OSError:
            continue
        if namespace != ours:
            return f"/proc/{child.pid}/root", namespace
    return None, 0


def _still_sandboxed(root: str | None, namespace: int) -> str | None:
    """``root`` (a /proc/<pid>/root that ``_sandboxed_root`` found) while its pid is still
    a process of the same mount namespace (so of the same sandbox), else None."""
    if not root:
        return None
    try:
        if os.stat(f"{root[: -len('root')]}ns/mnt").st_ino == namespace:
            return root
    except OSError:
        pass
    return None


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


class SandboxedKernelManager(SandboxMixin, AsyncKernelManager):
    """For nbclient / nbgrader's Execute: the student's kernel, read through its relay."""

    @default("relayed")
    def _relayed_default(self) -> bool:
        return True

    async def shutdown_kernel(self, now: bool = False, restart: bool = False):
        # jupyter_client binds shutdown_kernel to its own coroutine, which first sends an
        # interrupt and waits on a kernel that may be gone: ours (and a subclass's) kills.
        await self._async_shutdown_kernel(now=now, restart=restart)

    client_class = "autograder.sandbox.clients.ReadyClient"
    client_factory = ReadyClient


class SyncSandboxedKernelManager(SandboxMixin, KernelManager):
    """Blocking API: the test kernel, which outlives one notebook's event loop."""

    client_factory = BlockingKernelClient
    # jupyter_client binds the blocking methods to KernelManager's own coroutines, past
    # any override: bind shutdown to ours, so the watchdog stops and the folder goes.
    shutdown_kernel = run_sync(SandboxMixin._async_shutdown_kernel)

    def async_client(self) -> ReadyClient:
        """A client for use inside one event loop (the test kernel lives longer)."""
        kw = dict(
            self.get_connection_info(session=True),
            parent=self,
            context=guarded_context(self._sandbox().max_message_mb * 1_000_000, True),
        )
        return ReadyClient(**kw)


def launch_kernel(
    *, config=None, staging: Path | None = None, startup_timeout: float = 60
) -> SyncSandboxedKernelManager:
    """Start a sandboxed kernel (blocking API) and wait until it answers."""
    km = SyncSandboxedKernelManager(config=config)
    if staging is not None:
        km.staging = str(staging)
    km.start_kernel()
    kc = km.client()
    kc.start_channels(hb=False)  # the manager knows whether it lives (see sandbox/clients.py)
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        km.shutdown_kernel(now=True)
        raise
    finally:
        kc.stop_channels()
    return km
