"""A control group per grading kernel, where the grader may make one (as root).

The watchdog (``autograder.sandbox.manager``) sees a kernel's resident memory and its tmpfs
folders, but memory can hide from both: an unmapped ``memfd``, a System V shared-memory
segment. A control group counts every page its processes charge, however they hold it,
and caps their CPU time outright: a kernel over ``Sandbox.memory_mb`` is killed by the
kernel's OOM killer, and one that starts many busy processes gets ``Sandbox.max_cpus``
cores in all, never the machine. cgroup v2 (``/sys/fs/cgroup/cgroup.controllers``) or
v1 (``/sys/fs/cgroup/memory`` and ``/sys/fs/cgroup/cpu``). Where neither can be written
(an ordinary user, a locked-down container), ``unavailable()`` says why, and the
watchdog's own limits stand alone.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
BASE = "course-grade"
PERIOD_US = 100_000
TCP_BYTES = 16_000_000  # cgroup v1: a kernel's TCP buffers, beside its memory
STALE_SECONDS = 600  # a group is joined within a second of being made


@functools.cache
def unavailable() -> str | None:
    """Why kernels cannot get a control group here, or None when they can."""
    if os.geteuid() != 0:
        return "control groups need root"
    try:
        group = KernelGroup(memory_bytes=1 << 30, cpus=1.0)
    except OSError as exc:
        return f"no writable cgroup hierarchy ({exc.strerror or exc})"
    group.remove()
    sweep()
    return None


def sweep(older_than: float = STALE_SECONDS) -> int:
    """Remove the kernels' groups that a grader killed outright (SIGKILL, a lost machine)
    left behind: empty, and made long enough ago that no kernel is about to join them.
    How many."""
    removed = 0
    now = time.time()
    for base in (ROOT / BASE, ROOT / "memory" / BASE, ROOT / "cpu" / BASE):
        try:
            folders = [f for f in base.iterdir() if f.name.startswith("k-")]
        except OSError:
            continue
        for folder in folders:
            try:
                if now - folder.stat().st_mtime < older_than:
                    continue
                if (folder / "cgroup.procs").read_text().strip():
                    continue
                folder.rmdir()
                removed += 1
            except OSError:
                continue  # in use, or gone already
    return removed


class KernelGroup:
    """One kernel's control group (a folder per controller under v1, one under v2)."""

    def __init__(self, memory_bytes: int, cpus: float):
        self.name = f"k-{uuid.uuid4().hex[:12]}"
        self.v2 = (ROOT / "cgroup.controllers").exists()
        self.folders: list[Path] = []
        try:
            if self.v2:
                base = ROOT / BASE
                base.mkdir(exist_ok=True)
                (base / "cgroup.subtree_control").write_text("+memory +cpu")
                self.memory = self.cpu = self._make(base)
                _write(self.memory / "memory.max", str(memory_bytes))
                _write(self.memory / "memory.swap.max", "0", optional=True)
                if cpus:
                    _write(self.cpu / "cpu.max", f"{int(cpus * PERIOD_US)} {PERIOD_US}")
            else:
                self.memory = self._make(ROOT / "memory" / BASE)
                self.cpu = self._make(ROOT / "cpu" / BASE)
                _write(self.memory / "memory.limit_in_bytes", str(memory_bytes))
                _write(
                    self.memory / "memory.memsw.limit_in_bytes", str(memory_bytes), optional=True
                )  # no swapping out to hide, where swap is counted
                # v1 counts TCP buffers only once a group has a limit for them, and apart
                # from its memory (v2 counts them in it). A kernel can make no TCP socket
                # (autograder.sandbox.seccomp); before it could, a kernel started without a
                # template held 1.8 GB in unread buffers on its sandbox's loopback. A second wall.
                _write(
                    self.memory / "memory.kmem.tcp.limit_in_bytes", str(TCP_BYTES), optional=True
                )
                if cpus:
                    _write(self.cpu / "cpu.cfs_period_us", str(PERIOD_US))
                    _write(self.cpu / "cpu.cfs_quota_us", str(int(cpus * PERIOD_US)))
        except OSError:
            self.remove()
            raise

    def _make(self, base: Path) -> Path:
        base.mkdir(exist_ok=True)
        folder = base / self.name
        folder.mkdir()
        self.folders.append(folder)
        return folder

    def join_prefix(self) -> list[str]:
        """A command prefix that puts the process in the group before it runs anything."""
        procs = [str(f / "cgroup.procs") for f in self.folders]
        script = 'for f in "$@"; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 1; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *procs, "--"]

    def oom_kills(self) -> int:
        """How many processes the OOM killer took from this group."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            for line in (self.memory / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def tasks(self) -> int:
        """How many processes and threads the group holds."""
        try:
            with open(self.memory / ("cgroup.threads" if self.v2 else "tasks"), "rb") as f:
                return f.read().count(b"\n")
        except OSError:
            return 0

    def peak_mb(self) -> int:
        """The most memory the group held, in MB (0 where the kernel does not say)."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return round(int((self.memory / name).read_text()) / 1e6)
        except (OSError, ValueError):
            return 0

    def remove(self) -> None:
        """Remove the group once its processes are gone (they were killed just before)."""
        for folder in reversed(self.folders):
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.folders = []


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise
