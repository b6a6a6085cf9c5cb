"""Where every grading kernel runs: a bubblewrap sandbox with limits that hold.

Threat model: the code inside is hostile (a student's notebook), or handles hostile data
(the trusted test kernel decoding a student's answers). The sandbox is an allow-list:

- read-only: the system (/usr, /etc, ...), the Python installation, the virtual
  environment, the course's public packages, and one **staging** folder that the host
  filled with regular files only (the submission's own files for a student kernel, the
  instructor's data files for the test kernel);
- writable: a size-limited tmpfs at /tmp (the kernel's working folder is /tmp/work,
  filled from the staging folder at start; its ipc sockets are there too) and a
  size-limited tmpfs at /dev/shm, and nothing else: no host folder at all;
- absent: the course folder (source/, the gradebook, other students' work), the
  nbgrader exchange, the instructor's home, the network.

Nothing the kernel writes is ever read back by the host as a file: the kernel's only
output is Jupyter messages. Its tmpfs pages count against the memory limit (the
watchdog adds them to the process tree's resident memory), and the tmpfs sizes are the
disk quota.

Identity and limits:
- Run as root, bubblewrap binds as root, and ``autograder.sandbox.kernel_entry`` drops to the
  slot's own uid before anything else runs, so each kernel's processes count against
  their own RLIMIT_NPROC (never enforced for root). Where user namespaces are allowed it
  then enters a second, unprivileged bubblewrap (``--unshare-user --disable-userns``), so
  the kernel can never make a user namespace of its own; where they are refused, that
  uid cannot make one either.
- Run as an ordinary user, one bubblewrap gives the kernel its own user namespace and
  forbids further ones; Linux (5.14+) counts RLIMIT_NPROC per user namespace and uid.
- Run as an ordinary user without user namespaces, there is no safe sandbox:
  ``course-grade`` refuses and says why.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from traitlets import Bool, Dict, Float, Integer, List, TraitError, Unicode, validate
from traitlets.config import Configurable

# The layout inside the sandbox is kernel_entry's, which runs there and imports nothing
# but the standard library.
from autograder.sandbox.kernel_entry import (  # noqa: F401
    MODULE_NAME,
    STAGING_DIR,
    TEMPLATE_CAPS,
    WORK_DIR,
    nested_argv,
)

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Public packages the notebooks import; editable installs point outside the venv.
PUBLIC_PACKAGES = ("gpucourse", "autograder")
# Since Linux 5.14 RLIMIT_NPROC counts processes per user namespace (ucounts).
MIN_KERNEL_USERNS = (5, 14)


def unprivileged() -> bool:
    """True when grading runs as an ordinary user (no uid to give each kernel)."""
    return os.geteuid() != 0


def _kernel_version() -> tuple[int, int]:
    try:
        return tuple(int(p) for p in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        return (0, 0)


@functools.cache
def userns_problem(bwrap: str, uid: int = -1) -> str | None:
    """Why kernels cannot get their own user namespace here, or None when they can.

    ``uid`` >= 0 (grading as root): the probe runs as that uid, as the kernels will.
    """
    if _kernel_version() < MIN_KERNEL_USERNS:
        return (
            f"the process limit per kernel needs Linux 5.14 or later (this is {platform.release()})"
        )
    prefix = _setpriv(uid) if uid >= 0 else []
    try:
        probe = subprocess.run(
            prefix + [bwrap, "--unshare-user", "--disable-userns", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be started ({exc})"
    if probe.returncode != 0:
        return (
            "bubblewrap cannot give kernels their own user namespace here "
            f"({probe.stderr.strip() or probe.returncode}); on Ubuntu 24.04+ see "
            "kernel.apparmor_restrict_unprivileged_userns"
        )
    return None


def unprivileged_problem(bwrap: str) -> str | None:
    """Why sandboxing without root cannot work here, or None when it can."""
    return userns_problem(bwrap)


def gpu_devices() -> list[str]:
    """The NVIDIA device nodes of this machine (none on a machine without a GPU)."""
    import glob

    return sorted(
        p
        for p in glob.glob("/dev/nvidia*") + glob.glob("/dev/nvidia-caps/*")
        if os.path.exists(p) and not os.path.isdir(p)
    )


def _setpriv(uid: int) -> list[str]:
    setpriv = shutil.which("setpriv") or "setpriv"
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


class Sandbox(Configurable):
    """Limits and isolation for every grading kernel (set in nbgrader_config.py)."""

    cpu_seconds = Integer(
        300, help="CPU seconds a kernel may use in all (RLIMIT_CPU); then it is killed."
    ).tag(config=True)
    max_cpus = Float(
        1.5,
        help="CPU cores a kernel's processes may keep busy together, on average over "
        "4 s; above it the tree is killed (a kernel starting many busy processes, each in a "
        "session of its own, would otherwise starve the other students' kernels). "
        "0: no limit.",
    ).tag(config=True)
    wall_seconds = Integer(
        600, help="Wall-clock seconds a kernel may live; then its whole tree is killed."
    ).tag(config=True)
    memory_mb = Integer(
        4096,
        help="Memory (MB) of the kernel: its process tree's resident memory plus what it "
        "keeps in its tmpfs folders. Above it the tree is killed. Also set as RLIMIT_AS "
        "per process unless address_space_limit is False.",
    ).tag(config=True)
    address_space_limit = Bool(
        True,
        help="Also cap each process's address space (RLIMIT_AS) at memory_mb * 2, which "
        "stops a fast allocation before the watchdog sees it. CUDA reserves huge virtual "
        "ranges and fails under RLIMIT_AS: set this False to grade on a GPU.",
    ).tag(config=True)
    disk_mb = Integer(
        512,
        help="Size (MB) of the kernel's writable /tmp, its working folder included: "
        "its disk quota. Counted in memory_mb while used.",
    ).tag(config=True)
    shm_mb = Integer(
        256,
        help="Size (MB) of the kernel's /dev/shm (DataLoader workers share tensors "
        "there). Counted in memory_mb while used.",
    ).tag(config=True)
    max_processes = Integer(
        256,
        help="Processes and threads the kernel may have (RLIMIT_NPROC; the sandbox's own "
        "count too). A kernel that reaches it is killed: the fate 'too many processes'.",
    ).tag(config=True)
    max_output_mb = Integer(
        2,
        help="Output (MB) kept from one notebook's run, on every path (streams, "
        "displays, display updates, errors, widget messages); the rest is dropped.",
    ).tag(config=True)
    max_message_mb = Integer(
        64,
        help="Largest single message (MB) the grader accepts from a kernel; a bigger "
        "one cuts that kernel off.",
    ).tag(config=True)
    max_sent_mb = Integer(
        1024,
        help="What a student's kernel may send the grader in all (MB): outputs, the "
        "bridge's answers and any other messages, kept or not. Past it the kernel is cut "
        "off, as for a message over max_message_mb: the grader parses every message it "
        "receives, and one addressed to no request is counted by no other bound.",
    ).tag(config=True)
    max_replies_mb = Integer(
        256,
        help="What all of one submission's answers to the tests (the bridge's replies) "
        "may weigh together (MB). Each reply is read twice, by the grader and by the test "
        "kernel; past this, later calls of the tests get no answer and fail, and the "
        "report says why. The course's own tests send well under 1 MB a submission.",
    ).tag(config=True)
    max_file_mb = Integer(200, help="Largest file (MB) a kernel may write (RLIMIT_FSIZE).").tag(
        config=True
    )
    uid_base = Integer(
        61000, help="As root, kernels run as uid uid_base + slot (one uid per kernel slot)."
    ).tag(config=True)
    kernel_templates = Bool(
        True,
        help="Fork each test kernel from a template that has imported what every test "
        "kernel needs (autograder.sandbox.kernel_template). False: start each one as any kernel "
        "(slower; the same isolation).",
    ).tag(config=True)
    template_preload = Dict(
        value_trait=List(Unicode()),
        help="More modules the kernels' templates import before their first fork, by "
        'assignment: {"gpu_training": ["torch._dynamo"]}. A module that a unit\'s kernels '
        "import anyway, when it is costly (torch._dynamo: about 1.5 CPU s a kernel), is "
        "then imported once per worker, not twice per submission.",
    ).tag(config=True)
    bwrap = Unicode("bwrap", help="The bubblewrap executable.").tag(config=True)
    extra_ro_binds = List(
        Unicode(),
        help="More host paths to bind read-only (e.g. data sets the notebook reads).",
    ).tag(config=True)

    @validate("template_preload")
    def _module_names(self, proposal):
        for assignment, names in proposal["value"].items():
            bad = [name for name in names if not MODULE_NAME.fullmatch(name)]
            if bad:
                raise TraitError(
                    f"Sandbox.template_preload[{assignment!r}]: {bad[0]!r} is not a module name"
                )
        return proposal["value"]

    devices = List(
        Unicode(),
        help="Device nodes to bind into the sandbox (course-grade --gpu binds the "
        "/dev/nvidia* devices).",
    ).tag(config=True)

    def bwrap_path(self) -> str | None:
        """The executable: on PATH, or where Debian and Fedora install it (sudo, cron and
        service PATHs may leave /usr/bin out)."""
        found = shutil.which(self.bwrap)
        if found is None and "/" not in self.bwrap:
            found = next(
                (
                    p
                    for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap")
                    if os.access(p, os.X_OK)
                ),
                None,
            )
        return found

    def limits(self) -> dict:
        """What kernel_entry applies inside the sandbox."""
        return {
            "cpu_seconds": self.cpu_seconds,
            "address_space_mb": self.memory_mb * 2 if self.address_space_limit else 0,
            "max_processes": self.max_processes,
            "max_file_mb": self.max_file_mb,
        }

    def command(
        self, staging: Path, ro_files: list[Path], uid: int, template: bool = False
    ) -> tuple[list[str], dict]:
        """The command up to the kernel's own, and what kernel_entry must still do.

        ``uid`` >= 0 (root): bubblewrap runs as root, so that it can bind what only root
        may read, and kernel_entry drops to ``uid`` and then, where user namespaces are
        allowed, enters a second, unprivileged bubblewrap that gives the kernel its own
        user namespace and forbids further ones. ``uid`` < 0 (an ordinary user): one
        bubblewrap does both.
        """
        bwrap = self.bwrap_path() or self.bwrap
        if uid < 0:
            return self.argv(staging, ro_files, userns=True, template=template), {}
        steps = {"uid": uid}
        if userns_problem(bwrap, uid) is None:
            steps["nest"] = bwrap
        return self.argv(staging, ro_files, userns=False), steps

    def argv(
        self, staging: Path, ro_files=(), userns: bool = True, template: bool = False
    ) -> list[str]:
        """bwrap's arguments up to and including the ``--`` before the kernel command.
        ``template``: a kernel template's, with two capabilities in its own user namespace
        to give each kernel namespaces of its own (kernel_entry.TEMPLATE_CAPS)."""
        args = [self.bwrap_path() or self.bwrap]
        made: set[str] = set()

        def parents(path: str) -> None:
            # bwrap creates missing mount points 0700; a dropped uid could not pass them.
            for parent in reversed(list(Path(path).parents)[:-1]):
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
        mb = 1_000_000
        args.extend(["--size", str(self.disk_mb * mb), "--perms", "1777", "--tmpfs", "/tmp"])
        args.extend(["--size", str(self.shm_mb * mb), "--perms", "1777", "--tmpfs", "/dev/shm"])
        args.extend(["--mqueue", "/dev/mqueue"])  # its own: emptied between kernels, as /dev/shm
        for path in self._runtime_paths() + list(self.extra_ro_binds):
            parents(path)
            args.extend(["--ro-bind", path, path])
        for device in self.devices:
            args.extend(["--dev-bind", device, device])
        args.extend(["--ro-bind", str(staging), STAGING_DIR])
        for path in ro_files:
            parents(str(path))
            args.extend(["--ro-bind", str(path), str(path)])
        args.extend(["--chdir", "/tmp"])
        if userns:
            args.extend(["--unshare-user", "--disable-userns"])
            if template:
                args.extend(TEMPLATE_CAPS)
        args.extend(
            [
                "--unshare-ipc",
                "--unshare-pid",
                "--unshare-net",
                "--unshare-uts",
                "--unshare-cgroup-try",
                "--die-with-parent",
                "--new-session",
                "--hostname",
                "sandbox",
            ]
        )
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
        kept: list[str] = []
        for p in sorted(paths, key=len):
            if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
                kept.append(p)
        return [p for p in kept if not p.startswith(SYSTEM_DIRS)]
