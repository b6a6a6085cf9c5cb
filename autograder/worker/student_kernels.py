"""Students' kernels forked from a template: no submission pays again for Python,
ipykernel and torch, and no process ever holds two submissions' data.

One template per grading thread (slot), uid and sandbox settings
(``autograder.sandbox.kernel_template``, kind ``student``): it runs in the student kernel's own
sandbox, with its limits and its uid, has imported what every notebook imports, and has
never run a cell. For each submission:

- the host copies the submission's staged files (regular files only, as for any kernel)
  into a fresh subfolder of the template's read-only staging folder, after removing the
  one before it: a kernel sees only its own submission's files;
- it kills every process of the template's tree but the template's own (the kernel
  before, and anything that kernel started, daemons included), checks that the template
  is alive and not stopped (a kernel can signal it: then a new template starts), and asks
  for one child on new ipc ports with a new key;
- the child empties ``/tmp`` and ``/dev/shm``, fills its working folder and becomes the
  kernel. The template's control group, when there is one, caps the template and its
  child together (memory, tmpfs pages included, and CPU); the kernel's watchdog counts
  its tasks there (``KernelShare``), an OOM kill in it counts against the child, and the
  watchdog keeps its wall time. Without a group, its watchdog holds its memory (its
  tree's resident memory and the tmpfs), wall time, CPU share and process count, as for
  a started kernel.

Where no template can serve (``Sandbox.kernel_templates`` False, no sandbox, a template
that will not start or has more than one thread), the kernel starts as any kernel, and
the submission's details say why.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import psutil

from autograder.bridge import protocol
from autograder.sandbox.bubblewrap import Sandbox
from autograder.sandbox.kernel_entry import UNSAFE_TO_FORK
from autograder.sandbox.kernel_template import CANNOT_CLEAN
from autograder.sandbox.manager import (
    SOCKETS_IN_SANDBOX,
    SandboxedKernelManager,
    Watchdog,
    _tree,
    discard,
    kill_tree,
)
from autograder.sandbox.watchdog import _threads, descendants
from autograder.worker import tmpdirs

log = logging.getLogger(__name__)

_TEMPLATES: dict = {}
EXIT_SAID = 1.0  # seconds the template has to say how a child it reaped ended
# Seconds a template whose fork failed has to be seen ended: a template killed as it was
# asked can still be ending (its sandbox's outer process follows it) when the request fails.
ENDED_WAIT = 0.5
PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


class _Unclean(Exception):
    """The template has exited instead of forking: it could not end everything of the
    kernel before, or something ended it between two kernels."""


class TemplateUnusable(Exception):
    """No student-kernel template can serve: the kernel starts as any kernel."""


def _key(config, uid: int, slot: int, extra_env, preload) -> tuple:
    sandbox = Sandbox(config=config)
    settings = {
        name: getattr(sandbox, name)
        for name in sandbox.trait_names()
        if sandbox.trait_metadata(name, "config")
    }
    return (
        slot,
        uid,
        json.dumps(settings, sort_keys=True, default=str),
        tuple(extra_env),
        tuple(preload),
    )


def template(config, uid: int, slot: int, extra_env=(), preload=()) -> StudentTemplate:
    """The student-kernel template of one grading thread (``slot``), run as ``uid``, that
    has imported ``preload`` too (the assignment's ``Sandbox.template_preload``)."""
    key = _key(config, uid, slot, extra_env, preload)
    if key not in _TEMPLATES:
        for other in [k for k in _TEMPLATES if k[0] == slot]:
            _TEMPLATES.pop(other).close()  # one template per slot: settings changed
        _TEMPLATES[key] = StudentTemplate(config, uid, list(extra_env), list(preload))
    return _TEMPLATES[key]


def close_all() -> None:
    for kept in _TEMPLATES.values():
        kept.close()
    _TEMPLATES.clear()


class StudentTemplate:
    """One slot's template, started when first needed and again whenever it is gone."""

    def __init__(self, config, uid: int, extra_env: list[str], preload: list[str] | None = None):
        self.config, self.uid, self.extra_env = config, uid, extra_env
        self.preload = preload or []
        self.km: SandboxedKernelManager | None = None
        self.folder: Path | None = None
        self.starts = 0
        self.start_seconds = 0.0  # spent starting templates, not yet told (take_start_seconds)
        self.forks = 0
        self.unusable: str | None = None  # why no template can serve here

    async def fork(self, connection: dict, staging: Path) -> tuple[str, psutil.Process, int]:
        """A new kernel on ``connection`` with the files of ``staging``: the host path of
        its ``ip``, its process, and how many OOM kills its control group had before.
        A template that could not end everything of the kernel before it (``CANNOT_CLEAN``),
        or that something ended once the kernel before it was killed, is replaced by a new
        one, in a new sandbox, which forks the kernel instead."""
        try:
            return await self._fork(connection, staging)
        except _Unclean:
            pass
        try:
            return await self._fork(connection, staging)
        except _Unclean:
            raise TemplateUnusable("two templates in a row exited instead of forking it") from None

    async def _fork(self, connection: dict, staging: Path) -> tuple[str, psutil.Process, int]:
        if self.unusable:
            raise TemplateUnusable(self.unusable)
        if self.km is not None and not self._healthy():
            self.close()
        if self.km is None:
            await self._start()
        self.km.end_forked_kernels()
        name = self._stage(staging)
        self.forks += 1
        self.km.restart_wall_clock()
        try:
            ip = await self.km.fork_kernel(connection, name)
        except Exception as exc:  # noqa: BLE001
            status = self._ended_status()
            stopped = status is None and self.km.template_stopped()
            self.close()
            if status == CANNOT_CLEAN:
                log.info(
                    "a student-kernel template could not end the kernel before it "
                    "(uid %s): a new template in a new sandbox forks this one",
                    self.uid,
                )
                raise _Unclean() from None
            if status == UNSAFE_TO_FORK:
                self.unusable = "its template had more than one thread, and forking it is not safe"
                raise TemplateUnusable(self.unusable) from None
            if status is not None or stopped:
                # Ended (or stopped) between two kernels: by a process the kernel before left behind,
                # which outlived the kill of that kernel's tree and killed its template
                # just before this fork (outside attack 64). That is the kernel before's
                # doing, never this submission's: a new template serves it, as above, and
                # its report says nothing of it. (The old sandbox, and whatever was left
                # in it, ends with the template's pid namespace.)
                log.info(
                    "a student-kernel template ended before it forked (uid %s, status %s): "
                    "a new template in a new sandbox forks this one",
                    self.uid,
                    "stopped" if stopped else status,
                )
                raise _Unclean() from None
            raise TemplateUnusable(f"the forked kernel did not start ({exc})") from None
        child = self.km.forked_kernel()
        if child is None:
            self.close()
            raise TemplateUnusable("the forked kernel ended at once")
        group = getattr(self.km, "_group", None)
        return ip, child, group.oom_kills() if group is not None else 0

    def _ended_status(self) -> int | None:
        """The template's exit status, once its fork failed (None: it is still running)."""
        process = self.km.provisioner.process if self.km.provisioner else None
        if process is None:
            return None
        try:
            return process.wait(timeout=ENDED_WAIT)
        except subprocess.TimeoutExpired:
            return None

    def exit_status(self, child: psutil.Process) -> int | None:
        """How ``child``, which has ended, ended, as its template saw it (None: not known).
        The template says so just after it reaps the child: a moment is allowed for it."""
        fork = getattr(child, "_sandbox_fork", None)
        deadline = time.monotonic() + EXIT_SAID
        while self.km is not None and fork is not None:
            status = self.km.template_said().get(fork)
            if status is not None or time.monotonic() > deadline:
                return status
            time.sleep(0.02)
        return None

    def cpu_seconds(self, child: psutil.Process) -> float | None:
        """The CPU seconds ``child``, which has ended, used, as its template saw it."""
        fork = getattr(child, "_sandbox_fork", None)
        if self.km is None or fork is None:
            return None
        return self.km.template_cpu().get(fork)

    def capped(self) -> bool:
        """Whether its kernels run in its control group, whose CPU cap is Sandbox.max_cpus."""
        return self.km is not None and getattr(self.km, "_group", None) is not None

    def oom_kills(self) -> int:
        group = getattr(self.km, "_group", None) if self.km is not None else None
        return group.oom_kills() if group is not None else 0

    def end_kernels(self) -> None:
        if self.km is not None:
            self.km.end_forked_kernels()

    def _healthy(self) -> bool:
        """Alive, and not stopped or traced (by a kernel it forked: they share a uid)."""
        process = self.km.provisioner.process if self.km.provisioner else None
        if process is None or process.poll() is not None:
            return False
        for p in self.km._own_processes.values():
            try:
                if p.status() in (
                    psutil.STATUS_STOPPED,
                    psutil.STATUS_TRACING_STOP,
                    psutil.STATUS_ZOMBIE,
                    psutil.STATUS_DEAD,
                ):
                    return False
            except psutil.NoSuchProcess:
                return False
        return True

    def _stage(self, staging: Path) -> str:
        """Copy this submission's files into a new subfolder of the template's staging
        folder, removing whatever was there: the kernel sees no other submission's."""
        root = self.folder / "stage"
        for entry in root.iterdir():
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
        # An unguessable name in folders no one can list: a grader killed before it could
        # clean up leaves no student's files for another account to read.
        name = f"s{secrets.token_hex(16)}"
        if staging.is_dir():
            # The staged folder holds regular files only (the worker made it).
            shutil.copytree(staging, root / name, symlinks=False)
        else:
            (root / name).mkdir()
        (root / name).chmod(0o755)
        return name

    def take_start_seconds(self) -> float:
        """Seconds spent starting templates since the last call (for the run's steps)."""
        spent, self.start_seconds = self.start_seconds, 0.0
        return spent

    async def _start(self) -> None:
        started = time.monotonic()
        self.folder = tmpdirs.make("cg-student-")
        self.folder.chmod(0o711)
        (self.folder / "stage").mkdir()
        (self.folder / "stage").chmod(0o711)
        km = SandboxedKernelManager(config=self.config)
        km.uid, km.runtime_root, km.staging = self.uid, str(self.folder), str(self.folder / "stage")
        km.extra_env = self.extra_env
        km.template = "student"
        km.preload = self.preload
        try:
            await km.start_kernel()
        except Exception as exc:  # noqa: BLE001
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
            self.unusable = f"its template could not start ({exc})"
            raise TemplateUnusable(self.unusable) from None
        self.km = km
        self.starts += 1
        self.start_seconds += time.monotonic() - started
        log.debug("student-kernel template started (uid %s, start %d)", self.uid, self.starts)

    def close(self) -> None:
        km, folder, self.km, self.folder = self.km, self.folder, None, None
        discard(km, folder)


class ForkedProcess:
    """What jupyter_client needs of a kernel's process (``poll``, ``wait``, ``kill``...),
    for a kernel that is its template's child, not the grader's."""

    def __init__(self, process: psutil.Process, kept: StudentTemplate):
        self.process, self.kept, self.pid = process, kept, process.pid
        self.returncode: int | None = None
        self.cpu_seconds: float | None = None  # once it has ended, where its template said
        self.said = True  # False: it ended and its template did not say how (the code is a guess)
        self.stdin = self.stdout = self.stderr = None
        try:
            with open(f"/proc/{process.pid}/status") as f:
                line = next(x for x in f if x.startswith("NSpid:"))
            pid = int(line.split()[-1])
        except (OSError, StopIteration, ValueError):
            return
        # The template's latest fork with that pid: this kernel (it said so before its
        # sockets were there); its exit is read by that fork's number, never by the pid.
        process._sandbox_fork = kept.km.fork_number(pid) if kept.km is not None else None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                if self.process.status() != psutil.STATUS_ZOMBIE:
                    return None
            except psutil.NoSuchProcess:
                pass
            status = self.kept.exit_status(self.process)
            # jupyter_client needs a code; a kernel can stop or kill its template, which
            # then says nothing, and the code is only a stand-in (``said``).
            self.said = status is not None
            self.returncode = status if status is not None else -9
            self.cpu_seconds = self.kept.cpu_seconds(self.process)
        return self.returncode

    def wait(self, timeout=None) -> int:
        # Never psutil's wait: a kernel whose template is stopped stays a zombie, which
        # that wait would wait on for ever. A zombie has ended: poll says so.
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("forked kernel", timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        try:
            self.process.send_signal(signum)
        except psutil.NoSuchProcess:
            pass

    def kill(self) -> None:
        kill_tree(self.pid)

    def terminate(self) -> None:
        kill_tree(self.pid)


class ForkedKernelManager(SandboxedKernelManager):
    """For nbclient: the student's kernel, forked from its slot's template; started as
    any kernel where no template can serve (``without_template`` says why)."""

    without_template: str | None = None

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        # Started as any kernel (no template), it is still the kernel that answers the
        # bridge's requests; a forked one is made so by its template.
        kernel_cmd = [*kernel_cmd, protocol.STUDENT_KERNEL_OPTION]
        sandbox = self._sandbox()
        if not self.use_bwrap:  # course-grade --no-sandbox: said for the whole run already
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        reason = None
        if not sandbox.kernel_templates:
            reason = "kernel templates are turned off (Sandbox.kernel_templates)"
        else:
            kept = template(self.config, self.uid, self.slot, self.extra_env, self.preload)
            ports = {name: getattr(self, name) for name in PORTS}
            try:
                return await self._launch_forked(kept, sandbox)
            except TemplateUnusable as exc:
                reason = str(exc)
                for name, port in ports.items():  # those of the connection file it wrote
                    setattr(self, name, port)
        self.without_template = reason
        log.info("a student's kernel started without a template: %s", reason)
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _launch_forked(self, kept: StudentTemplate, sandbox: Sandbox) -> None:
        # New socket names for every kernel: the kernel before left its sockets in the
        # template's tmpfs until the next one empties it, and a client that found an old
        # socket first would wait on a kernel that is gone.
        base = 10 * (kept.forks + 1)
        for offset, name in enumerate(
            ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"), start=1
        ):
            setattr(self, name, base + offset)
        info = self.get_connection_info()
        connection = {
            k: info[k]
            for k in (
                "shell_port",
                "iopub_port",
                "stdin_port",
                "control_port",
                "hb_port",
                "transport",
                "signature_scheme",
            )
        }
        connection.update(
            ip=SOCKETS_IN_SANDBOX,
            kernel_name="",
            key=info["key"].decode() if isinstance(info["key"], bytes) else info["key"],
        )
        self.start_relay()  # its process starts while the kernel is forked
        ip, child, self._oom_before = await kept.fork(
            connection, Path(self.staging or self._empty_staging)
        )
        self._kept, self._forked_child = kept, child
        self._group = None
        process = ForkedProcess(child, kept)
        self.provisioner.process, self.provisioner.pid, self.provisioner.pgid = (
            process,
            child.pid,
            None,
        )
        self._log_path = kept.km._log_path
        # RLIMIT_NPROC counts the template's own processes of the kernel's uid too: the
        # kernel's tree reaches its share of the limit that much sooner, and must be
        # called at it, or a fork bomb stuck at the limit would never be named.
        watched = Sandbox(config=self.config)
        if kept.capped():
            # The template's control group already holds the kernel to max_cpus cores;
            # a watchdog measuring the same share against the same limit would call a
            # breach on the cap's own jitter (1.5x over 4 s read as 1.52 on a loaded
            # machine), and a busy kernel's fate would depend on what else ran.
            watched.max_cpus = 0
        if watched.max_processes:
            watched.max_processes = max(
                1, watched.max_processes - _threads_of_uid(kept.km._own_processes.values(), child)
            )
        # In the template's control group the kernel's share of it is read from the
        # group's own files; walking /proc (every process of the machine, five times a
        # second) cost about a twentieth of a CPU second a submission.
        share = (
            KernelShare(
                kept.km._group, kept.km._own_processes.values(), self._oom_before, child.pid
            )
            if kept.capped()
            else None
        )
        self._watchdog = Watchdog(child.pid, watched, self.events, share)
        self.ip = self.relay_from(ip)
        self.provisioner.connection_info = {**info, "ip": self.ip}
        self._watchdog.start()
        self._own_processes = _tree(child.pid)

    def oom_killed(self) -> bool:
        kept = getattr(self, "_kept", None)
        if kept is not None:
            return kept.oom_kills() > getattr(self, "_oom_before", 0)
        return super().oom_killed()

    async def _async_shutdown_kernel(self, now: bool = False, restart: bool = False):
        try:
            await super()._async_shutdown_kernel(now=now, restart=restart)
        finally:
            kept = getattr(self, "_kept", None)
            if kept is not None:
                kept.end_kernels()  # whatever the kernel started goes with it


class KernelShare:
    """What one forked kernel holds of its template's control group, as the watchdog
    reads a group: its tasks (the group's, less the template's own processes' threads,
    which do not change while a kernel lives: the kernel before was ended first), and
    the OOM kills since it was forked. A process the kernel left outside its own tree
    (a daemon that the sandbox's init adopted) still counts: it is in the group.

    A zombie has left the group's task list but holds its place under RLIMIT_NPROC until
    it is reaped: a fork bomb of children that exit at once sat at the limit unnamed
    (attack 44). So the first look and every ``WALK_EVERY``-th also count the kernel's
    tree from /proc (zombies included), as the watchdog did at every look before, and the
    larger count stands (a zombie stays until reaped, so it is seen within a second)."""

    WALK_EVERY = 5

    def __init__(self, group, own_processes, oom_before: int, pid: int):
        self.group, self.oom_before, self.pid = group, oom_before, pid
        self.own = _threads(own_processes)
        self.looks = 0

    def tasks(self) -> int:
        self.looks += 1
        if self.looks % self.WALK_EVERY == 1:
            return self.last_tasks()
        return self._in_group()

    def last_tasks(self) -> int:
        """The group's count and the walk's, the larger (the watchdog's last look)."""
        try:
            root = psutil.Process(self.pid)
            in_tree = _threads([root] + descendants(root))
        except psutil.NoSuchProcess:
            in_tree = 0
        return max(self._in_group(), in_tree)

    def _in_group(self) -> int:
        return max(0, self.group.tasks() - self.own)

    def oom_kills(self) -> int:
        return self.group.oom_kills() - self.oom_before

    def peak_mb(self) -> int:
        return self.group.peak_mb()


def _threads_of_uid(processes, child: psutil.Process) -> int:
    """Threads of ``processes`` that run as ``child``'s uid (they count in its limit)."""
    try:
        uid = child.uids().real
    except psutil.NoSuchProcess:
        return 0
    count = 0
    for p in processes:
        try:
            if p.uids().real == uid:
                count += p.num_threads()
        except psutil.NoSuchProcess:
            continue
    return count
