"""Where a student kernel runs: a bubblewrap sandbox with resource limits.

The sandbox is an allow-list: the system (/usr, /etc, ...), the Python installation, the
virtual environment and the course's public package sources are bound read-only; the
submission's work folder and the kernel's runtime folder (connection file and ``ipc``
sockets) are the only writable paths. The course folder (source/, gradebook.db, other
students' work), the nbgrader exchange and the instructor's home are simply absent.
There is no network namespace to reach: the kernel talks to jupyter_client over Unix
sockets in its runtime folder.

Inside, ``autograder.kernel_entry`` sets the rlimits and drops root to ``uid`` before
any student code runs, because the kernel does not enforce RLIMIT_NPROC for root, and a
fork bomb must be stopped. Each parallel grading slot gets its own uid, so one
submission's processes never count against another's. Run by an ordinary user, there is
no uid to drop to: each kernel gets its own user namespace instead (``--unshare-user``),
where Linux (5.14+) counts RLIMIT_NPROC per namespace and enforces it, since a process
there holds no capability in the initial namespace.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from traitlets import Bool, Integer, List, Unicode
from traitlets.config import Configurable

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Public packages the notebooks import; editable installs point outside the venv.
PUBLIC_PACKAGES = ("gpucourse", "autograder")


# Since Linux 5.14 RLIMIT_NPROC counts processes per user namespace (ucounts): before,
# it counted all of the instructor's own processes, and could not stop a fork bomb.
MIN_KERNEL_UNPRIVILEGED = (5, 14)


def unprivileged() -> bool:
    """True when grading runs as an ordinary user (no uid to give each kernel)."""
    return os.geteuid() != 0


def unprivileged_problem(bwrap: str) -> str | None:
    """Why sandboxing without root cannot work here, or None when it can."""
    release = platform.release()
    try:
        version = tuple(int(part) for part in release.split("-")[0].split(".")[:2])
    except ValueError:
        version = (0, 0)
    if version < MIN_KERNEL_UNPRIVILEGED:
        return (f"without root, the process limit needs Linux 5.14 or later (this is "
                f"{release})")
    probe = subprocess.run([bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return ("without root, bubblewrap needs unprivileged user namespaces, and this "
                f"system refuses them ({probe.stderr.strip() or probe.returncode}); on "
                "Ubuntu 24.04+ see kernel.apparmor_restrict_unprivileged_userns")
    return None


class Sandbox(Configurable):
    """Limits and isolation for every student kernel (set in nbgrader_config.py)."""

    cpu_seconds = Integer(
        300, help="CPU seconds a kernel may use in all (RLIMIT_CPU); then it is killed."
    ).tag(config=True)
    wall_seconds = Integer(
        600, help="Wall-clock seconds a kernel may live; then its whole tree is killed."
    ).tag(config=True)
    memory_mb = Integer(
        4096,
        help="Resident memory (MB) of the kernel's whole process tree; above it the tree "
        "is killed. Also set as RLIMIT_AS per process unless address_space_limit is False.",
    ).tag(config=True)
    address_space_limit = Bool(
        True,
        help="Also cap each process's address space (RLIMIT_AS) at memory_mb * 2, which "
        "stops a fast allocation before the watchdog sees it. CUDA reserves huge virtual "
        "ranges and fails under RLIMIT_AS: set this False to grade on a GPU.",
    ).tag(config=True)
    max_processes = Integer(
        256,
        help="Processes and threads the kernel's uid may have (RLIMIT_NPROC); stops fork bombs.",
    ).tag(config=True)
    max_output_mb = Integer(
        2, help="Output (MB) kept from one notebook's run; the rest is dropped with a note."
    ).tag(config=True)
    max_file_mb = Integer(
        200, help="Largest file (MB) a kernel may write (RLIMIT_FSIZE)."
    ).tag(config=True)
    uid_base = Integer(
        61000, help="Kernels run as uid uid_base + slot (one uid per parallel slot)."
    ).tag(config=True)
    audit_hooks = Bool(
        True, help="Install autograder.audit's hooks in each kernel (when that module exists)."
    ).tag(config=True)
    bwrap = Unicode("bwrap", help="The bubblewrap executable.").tag(config=True)
    extra_ro_binds = List(
        Unicode(),
        help="More host paths to bind read-only (e.g. data sets the notebook reads). "
        "For GPU grading add the /dev/nvidia* devices here and set address_space_limit False.",
    ).tag(config=True)

    def bwrap_path(self) -> str | None:
        return shutil.which(self.bwrap)

    def limits(self) -> dict:
        """What kernel_entry applies inside the sandbox."""
        return {
            "cpu_seconds": self.cpu_seconds,
            "address_space_mb": self.memory_mb * 2 if self.address_space_limit else 0,
            "max_processes": self.max_processes,
            "max_file_mb": self.max_file_mb,
            "audit_hooks": self.audit_hooks,
        }

    def argv(self, work_dir: Path, rw_paths: list[Path], uid: int | None) -> list[str]:
        """bwrap's arguments up to and including the ``--`` before the kernel command."""
        args = [self.bwrap_path() or self.bwrap]
        made: set[str] = set()

        def parents(path: str) -> None:
            # bwrap creates missing mount points 0700; a dropped uid could not pass them.
            parts = Path(path).parents
            for parent in reversed(list(parts)[:-1]):
                p = str(parent)
                if p not in made and p != "/tmp":
                    made.add(p)
                    args.extend(["--perms", "0755", "--dir", p])

        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                args.extend(["--symlink", os.readlink(d), d])
            elif os.path.isdir(d):
                args.extend(["--ro-bind", d, d])
        args.extend(["--proc", "/proc", "--dev", "/dev"])
        args.extend(["--perms", "1777", "--tmpfs", "/tmp"])
        args.extend(["--perms", "1777", "--tmpfs", "/dev/shm"])
        for path in self._runtime_paths() + list(self.extra_ro_binds):
            parents(path)
            args.extend(["--ro-bind", path, path])
        for path in [work_dir, *rw_paths]:
            parents(str(path))
            args.extend(["--bind", str(path), str(path)])
        args.extend(["--chdir", str(work_dir)])
        if unprivileged():
            # Without root there is no uid to drop to; the kernel gets its own user
            # namespace instead, in which RLIMIT_NPROC counts only its own processes.
            args.append("--unshare-user")
        # As root, not --unshare-all: it adds a user namespace in which only root is
        # mapped, and then the kernel could not drop to its own uid.
        args.extend(["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                     "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                     "--hostname", "sandbox"])
        args.append("--")
        return args

    def _runtime_paths(self) -> list[str]:
        paths = {os.path.realpath(sys.base_prefix), sys.prefix}
        for name in PUBLIC_PACKAGES:
            spec = importlib.util.find_spec(name)
            for location in (spec.submodule_search_locations or []) if spec else []:
                if not location.startswith((sys.prefix, sys.base_prefix)):
                    paths.add(location)
        # A bind nested in another would be shadowed or redundant: keep the outermost.
        ordered = sorted(paths, key=len)
        kept: list[str] = []
        for p in ordered:
            if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
                kept.append(p)
        return [p for p in kept if not p.startswith(SYSTEM_DIRS)]
