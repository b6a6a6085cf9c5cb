"""The watchdog of a sandboxed kernel: a thread in the grader that kills the kernel's whole
process tree when it passes a limit (memory with its tmpfs, wall time, CPU share,
processes) or when its relay ends, and records why as an ``Event`` of the submission.

It reads only /proc and the control group's own files: nothing a kernel could write.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import psutil

from autograder.fates import Event, Kind
from autograder.sandbox.procs import descendant_pids
from autograder.sandbox.relay import Relay

log = logging.getLogger(__name__)

WATCH_INTERVAL = 0.2
CPU_WINDOW = 4.0  # seconds over which a kernel's CPU share is measured
TMPFS_MOUNTS = ("tmp", "dev/shm")
DYING = 1.0  # seconds a kernel whose relay ended has to finish exiting on its own


def descendants(root: psutil.Process) -> list[psutil.Process]:
    """``root.children(recursive=True)``, read from the tree's own /proc files where the
    machine has them (``procs.descendant_pids``); NoSuchProcess where ``root`` has ended
    or its pid is another process's now, as psutil says it."""
    pids = descendant_pids(root.pid)
    if pids is None:
        return root.children(recursive=True)
    # After the walk, not before (psutil's order): a root that ended, or whose pid became
    # another process's, while its files were read is caught here too.
    if not root.is_running():
        raise psutil.NoSuchProcess(root.pid)
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    return procs


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (collected first, so none is orphaned)."""
    try:
        root = psutil.Process(pid)
        procs = descendants(root) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass


def tmpfs_bytes(pids: list[int]) -> int:
    """Bytes used in the sandbox's tmpfs folders, seen through a sandboxed process."""
    for pid in pids:
        total, seen = 0, False
        for mount in TMPFS_MOUNTS:
            try:
                st = os.statvfs(f"/proc/{pid}/root/{mount}")
            except OSError:
                continue
            seen = True
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
        if seen and os.stat(f"/proc/{pid}/root").st_dev != os.stat("/").st_dev:
            return total
    return 0


def _threads(procs) -> int:
    """Processes and threads (what RLIMIT_NPROC counts) of a process tree."""
    count = 0
    for p in procs:
        try:
            count += p.num_threads()
        except psutil.NoSuchProcess:
            pass
    return count


def _proportional(procs) -> int:
    """Bytes a process tree holds, each page shared between its processes counted once
    (the sum of their proportional set sizes)."""
    total = 0
    for p in procs:
        try:
            try:
                total += p.memory_full_info().pss
            except psutil.AccessDenied:  # then the count that can only overstate
                total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class Watchdog(threading.Thread):
    """Kills the kernel's process tree when it passes its memory, wall-time or CPU-share
    limit.

    The CPU share is the tree's CPU time per second over the last ``CPU_WINDOW`` seconds,
    reaped children included: a kernel that keeps more than ``Sandbox.max_cpus`` cores
    busy (many processes, each in a session of its own, which the scheduler would treat
    as so many users) would starve the other students' kernels into timeouts.

    A kernel whose processes and threads reach ``Sandbox.max_processes`` is killed too: a
    fork bomb stopped by RLIMIT_NPROC leaves that many copies of the kernel behind, and
    what they go on to hold (how much memory each copy writes to) depends on the machine.
    So the fate of a fork bomb is always "too many processes", never a race between the
    copies and the memory limit. The last look, at shutdown, catches copies that outlived
    their cell between two looks.

    Without a control group, memory is the tree's resident memory, but pages that forked
    processes share are counted once (proportional set size) before a breach is called:
    resident sizes count them in every copy, and would kill a DataLoader's workers.

    In a control group (``autograder.sandbox.cgroups``) the machine's own kernel holds memory
    (tmpfs pages included) and CPU, so the watchdog only keeps the wall clock, counts the
    group's tasks and reports its OOM kills: it never walks the process tree, a scan of
    all of /proc that, five times a second for each of a worker's two kernels, cost a
    tenth of a CPU second per submission.
    """

    def __init__(self, pid: int, sandbox, events: list, group=None):
        super().__init__(daemon=True, name=f"watchdog-{pid}")
        self.pid, self.events, self.group = pid, events, group
        self.memory_mb, self.wall_seconds = sandbox.memory_mb, sandbox.wall_seconds
        self.max_processes = sandbox.max_processes
        self.breached = False
        # A control group caps the CPU itself; without one, a breach of the share kills.
        self.max_cpus = 0 if group is not None else sandbox.max_cpus
        self.stopped = threading.Event()
        self.started_at = time.monotonic()
        self.samples: list[tuple[float, float]] = []
        self.relay: Relay | None = None  # a student's kernel: what the grader reads through

    def restart_clock(self) -> None:
        self.started_at = time.monotonic()
        self.samples.clear()

    def run(self) -> None:
        while not self.stopped.wait(WATCH_INTERVAL):
            cut_off = self._flood()
            if cut_off:
                self.breached = True
                self.events.append(cut_off)
                log.info("kernel %d cut off: %s", self.pid, cut_off.reason)
                kill_tree(self.pid)
                return
            try:
                root = psutil.Process(self.pid)
                if root.status() == psutil.STATUS_ZOMBIE:
                    return self._ended()
                if self.group is not None:
                    breach = self._oom() or self._processes(self.group.tasks()) or self._wall()
                else:
                    breach = self._breach([root] + descendants(root))
            except psutil.NoSuchProcess:
                return self._ended()
            if breach:
                self.breached = True
                self.events.append(breach)
                log.info("kernel %d killed: %s", self.pid, breach)
                kill_tree(self.pid)
                return

    def last_look(self) -> None:
        """Before the kernel's tree is killed at shutdown (the loop has stopped): record a
        kernel that is at its process limit now."""
        self.join(timeout=2 * WATCH_INTERVAL)
        if self.breached or self.is_alive():
            return
        if self.group is not None:
            count = getattr(self.group, "last_tasks", self.group.tasks)()
        else:
            try:
                root = psutil.Process(self.pid)
                count = _threads([root] + descendants(root))
            except psutil.NoSuchProcess:
                return
        breach = self._processes(count)
        if breach:
            self.breached = True
            self.events.append(breach)

    def _flood(self) -> Event | None:
        """The relay of a kernel still running ended: the kernel cannot be read any more
        (it sent more than the grader takes from a kernel). A kernel that is dying closes
        its sockets before it is a zombie, which ends its relay too: it is given a moment
        to finish, so that its own end (a CPU limit, a crash) is what its fate says."""
        why = self.relay.ended() if self.relay is not None else None
        if why is None or self.stopped.is_set():
            return None
        deadline = time.monotonic() + DYING
        while True:
            try:
                if psutil.Process(self.pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    return None
            except psutil.NoSuchProcess:
                return None
            if time.monotonic() >= deadline:
                return Event(Kind.FLOOD, reason=why)
            time.sleep(0.05)

    def _processes(self, count: int) -> Event | None:
        if self.max_processes and count >= self.max_processes:
            return Event(Kind.PROCESSES, used=count, limit=self.max_processes)
        return None

    def _ended(self) -> None:
        """The kernel ended on its own: say so if its control group's OOM killer did it."""
        breach = self._oom()
        if breach:
            self.events.append(breach)

    def _oom(self) -> Event | None:
        if self.group is not None and self.group.oom_kills():
            # Its control group ran out: memory it held where no process shows it too.
            peak = max(self.group.peak_mb(), self.memory_mb)
            return Event(Kind.MEMORY, used=peak, limit=self.memory_mb)
        return None

    def _wall(self) -> Event | None:
        if self.wall_seconds and time.monotonic() - self.started_at > self.wall_seconds:
            return Event(Kind.WALL, limit=self.wall_seconds)
        return None

    def _breach(self, procs) -> Event | None:
        resident = cpu = threads = 0.0
        for p in procs:
            try:
                with p.oneshot():
                    threads += p.num_threads()
                    resident += p.memory_info().rss
                    t = p.cpu_times()
                cpu += t.user + t.system + t.children_user + t.children_system
            except psutil.NoSuchProcess:
                pass
        breach = self._processes(int(threads))
        if breach:
            return breach
        used_mb = (resident + tmpfs_bytes([p.pid for p in procs])) / 1e6
        if self.memory_mb and used_mb > self.memory_mb:
            # Resident sizes count shared pages in every process: only a count that shares
            # them out (a few ms a process, so only here) may call the breach.
            used_mb += (_proportional(procs) - resident) / 1e6
            if used_mb > self.memory_mb:
                return Event(Kind.MEMORY, used=round(used_mb), limit=self.memory_mb)
        breach = self._oom() or self._wall()
        if breach:
            return breach
        now = time.monotonic()
        self.samples.append((now, cpu))
        while self.samples and now - self.samples[0][0] > CPU_WINDOW:
            self.samples.pop(0)
        first_time, first_cpu = self.samples[0]
        if self.max_cpus and now - first_time >= CPU_WINDOW * 0.9:
            share = (cpu - first_cpu) / (now - first_time)
            if share > self.max_cpus:
                return Event(Kind.CPU_SHARE, used=round(share, 1), limit=self.max_cpus)
        return None
