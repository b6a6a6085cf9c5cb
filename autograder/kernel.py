"""Kernel managers that start every kernel in the sandbox, and a watchdog for its limits.

nbgrader's ``Execute`` (through nbclient) creates a kernel manager from
``kernel_manager_class``; ours keeps jupyter_client's whole protocol and changes only
where the kernel runs: the command becomes ``bwrap ... python -m autograder.kernel_entry``,
the transport becomes ``ipc`` with its sockets in a runtime folder bound into the sandbox,
and a watchdog thread kills the kernel's whole process tree when it holds too much memory
or lives too long. What happened is appended to ``events_file`` (JSON lines), which the
grading worker reads to decide the submission's fate.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from jupyter_client.manager import AsyncKernelManager, KernelManager
from jupyter_core.utils import run_sync
from traitlets import Bool, Integer, Unicode
from traitlets.config import Configurable

from autograder.context import AUDIT_LOG_ENV
from autograder.kernel_entry import LIMITS_ENV, UID_ENV
from autograder.sandbox import Sandbox

WATCH_INTERVAL = 0.2


def record_event(events_file: str, event: str, **details) -> None:
    if not events_file:
        return
    with open(events_file, "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": event, "time": time.time(), **details}) + "\n")


def read_events(events_file: Path) -> list[dict]:
    try:
        lines = Path(events_file).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (collected first, so none is orphaned)."""
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


class Watchdog(threading.Thread):
    """Kills the kernel's process tree when it passes its memory or wall-time limit."""

    def __init__(self, pid: int, memory_mb: int, wall_seconds: int, events_file: str):
        super().__init__(daemon=True, name=f"watchdog-{pid}")
        self.pid, self.memory_mb, self.wall_seconds = pid, memory_mb, wall_seconds
        self.events_file = events_file
        self.stopped = threading.Event()
        self.started_at = time.monotonic()

    def restart_clock(self) -> None:
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self.stopped.wait(WATCH_INTERVAL):
            try:
                root = psutil.Process(self.pid)
                if root.status() == psutil.STATUS_ZOMBIE:
                    return
                procs = [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                return
            rss = 0
            for p in procs:
                try:
                    rss += p.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            rss_mb = rss / 1e6
            if self.memory_mb and rss_mb > self.memory_mb:
                record_event(self.events_file, "memory", rss_mb=round(rss_mb),
                             limit_mb=self.memory_mb)
                kill_tree(self.pid)
                return
            if self.wall_seconds and time.monotonic() - self.started_at > self.wall_seconds:
                record_event(self.events_file, "wall", limit_s=self.wall_seconds)
                kill_tree(self.pid)
                return


class SandboxMixin(Configurable):
    """The parts shared by the async manager (nbclient) and the sync one (integrity).

    Configure it as ``SandboxMixin.<trait>`` to reach both managers.
    """

    use_bwrap = Bool(True, help="Run the kernel under bubblewrap.").tag(config=True)
    uid = Integer(-1, help="Drop root to this uid inside the sandbox (-1: keep).").tag(config=True)
    runtime_root = Unicode(
        "", help="Folder for the kernel's connection file and ipc sockets (short path)."
    ).tag(config=True)
    audit_log = Unicode("", help="Passed to the kernel as COURSE_GRADE_AUDIT_LOG.").tag(config=True)
    events_file = Unicode("", help="Where limit breaches are recorded (JSON lines).").tag(config=True)

    _watchdog: Watchdog | None = None

    async def _async_pre_start_kernel(self, **kw):
        # Without a runtime_root (a caller outside the pipeline) the folder is ours to
        # remove at shutdown.
        self._made_root = None if self.runtime_root else tempfile.mkdtemp(prefix="cg-", dir="/tmp")
        root = self.runtime_root or self._made_root
        self._runtime_dir = Path(tempfile.mkdtemp(prefix="k", dir=root))
        self._runtime_dir.chmod(0o755)
        self.transport = "ipc"
        self.ip = str(self._runtime_dir / "ipc")
        self.connection_file = str(self._runtime_dir / "kernel.json")
        # SIGINT to bwrap's process group never reaches the kernel in its own session;
        # ipykernel's interrupt_request (control channel) does.
        if self.kernel_spec is not None:
            self.kernel_spec.interrupt_mode = "message"
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        sandbox = Sandbox(config=self.config)
        work_dir = Path(kw.get("cwd") or os.getcwd()).resolve()
        extra = kernel_cmd[kernel_cmd.index("-f") + 2:] if "-f" in kernel_cmd else []
        command = [sys.executable, "-m", "autograder.kernel_entry",
                   "-f", self.connection_file, *extra]
        rw = [self._runtime_dir]
        if self.audit_log:
            Path(self.audit_log).touch()
            rw.append(Path(self.audit_log))
        if self.uid >= 0:
            for path in [work_dir, *rw]:
                chown_tree(path, self.uid)
        if self.use_bwrap:
            command = sandbox.argv(work_dir, rw, self.uid) + command
        # bwrap's --die-with-parent ends the kernel when bwrap dies, but bwrap itself
        # outlived a SIGKILLed grader once: tie it to its parent too.
        setpriv = shutil.which("setpriv")
        if setpriv:
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        kw["env"] = self._kernel_env(sandbox)
        kw["cwd"] = str(work_dir)
        # Never the instructor's terminal: a student's os.write(1, ...) lands in this log,
        # which RLIMIT_FSIZE caps like any other file the kernel writes.
        log = open(self._runtime_dir / "kernel.log", "ab")
        kw["stdout"] = kw["stderr"] = log
        kw["stdin"] = subprocess.DEVNULL
        try:
            await super()._async_launch_kernel(command, **kw)
        finally:
            log.close()
        self._watchdog = Watchdog(self.provisioner.pid, sandbox.memory_mb,
                                  sandbox.wall_seconds, self.events_file)
        self._watchdog.start()

    def restart_wall_clock(self) -> None:
        """Count the wall-time limit from now (a kernel reused for another task)."""
        if self._watchdog is not None:
            self._watchdog.restart_clock()

    def _kernel_env(self, sandbox: Sandbox) -> dict:
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
            AUDIT_LOG_ENV: self.audit_log,
        }
        if self.uid >= 0:
            env[UID_ENV] = str(self.uid)
        return env

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False):
        try:
            await super()._async_shutdown_kernel(now=now, restart=restart)
        finally:
            if self._watchdog is not None:
                self._watchdog.stopped.set()
            if self.provisioner is not None and self.provisioner.pid:
                kill_tree(self.provisioner.pid)
            folder = getattr(self, "_made_root", None) or getattr(self, "_runtime_dir", None)
            if folder and not restart:
                shutil.rmtree(folder, ignore_errors=True)

    async def _async_kill_kernel(self, restart: bool = False):
        if self.provisioner is not None and self.provisioner.pid:
            kill_tree(self.provisioner.pid)
        await super()._async_kill_kernel(restart=restart)


class SandboxedKernelManager(SandboxMixin, AsyncKernelManager):
    """For nbclient / nbgrader's Execute."""


class SyncSandboxedKernelManager(SandboxMixin, KernelManager):
    """For callers that want the blocking API (the integrity review's clean room)."""

    # jupyter_client binds the blocking methods to KernelManager's own coroutines, past
    # any override: bind shutdown to ours, so the watchdog stops and the folder goes.
    shutdown_kernel = run_sync(SandboxMixin._async_shutdown_kernel)


def launch_kernel(work_dir: Path, audit_log: Path | None = None, *, config=None,
                  startup_timeout: float = 60) -> SyncSandboxedKernelManager:
    """Start a sandboxed kernel with cwd ``work_dir`` and wait until it answers."""
    km = SyncSandboxedKernelManager(config=config)
    if audit_log is not None:
        km.audit_log = str(audit_log)
    km.start_kernel(cwd=str(work_dir))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        km.shutdown_kernel(now=True)
        raise
    finally:
        kc.stop_channels()
    return km
