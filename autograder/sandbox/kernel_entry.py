"""The one way a grading kernel starts: ``python -I -m autograder.sandbox.kernel_entry -f CONN``.

Runs inside the sandbox (``autograder.sandbox.bubblewrap``), before any code of the notebook:
applies the rlimits passed in ``COURSE_GRADE_LIMITS`` (JSON), drops root to
``COURSE_GRADE_UID`` when set (RLIMIT_NPROC is not enforced for root; a template first
starts its pid keeper, ``start_pid_keeper``), enters the second
bubblewrap named by ``COURSE_GRADE_NEST`` when set (a user namespace that allows no other;
this module then runs again inside it), installs the socket filter
(``autograder.sandbox.seccomp``: no socket but a Unix one), fills the working folder from the read-only
staging folder, then hands over to ipykernel (or, for a test kernel's template, to
``autograder.sandbox.kernel_template``, which forks one kernel per submission). It imports nothing but the standard
library before ipykernel: it runs twice for every student's kernel. ``-I`` keeps the working folder off ``sys.path`` until
then, so a submitted ``ipykernel.py`` cannot run before the limits. Anything this module
cannot do is fatal: a kernel without its limits must not run.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import sys

LIMITS_ENV = "COURSE_GRADE_LIMITS"
UID_ENV = "COURSE_GRADE_UID"
# The bubblewrap to enter after dropping root (see autograder.sandbox.bubblewrap).
NEST_ENV = "COURSE_GRADE_NEST"
# Outside the sandbox (course-grade --no-sandbox) the host names the two folders.
DIRS_ENV = "COURSE_GRADE_DIRS"
# Set to a kind ("test", "student"): become that kind of kernel's template
# (``autograder.sandbox.kernel_template``), not a kernel.
TEMPLATE_ENV = "COURSE_GRADE_TEMPLATE"
# Comma-separated modules a template imports beyond its kind's own (Sandbox.template_preload).
PRELOAD_ENV = "COURSE_GRADE_PRELOAD"
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# A template's pipe to its pid keeper: "request_fd,reply_fd" (see start_pid_keeper).
PIDS_ENV = "COURSE_GRADE_PIDS"
# Every kernel a template forks gets the pid after this one, so that no kernel can move
# the pid counter to leave the next one a number in its pid.
KERNEL_PID_BEFORE = 999
NOBODY = 65534
CAP_CHECKPOINT_RESTORE = 40
_PR_CAPBSET_DROP, _PR_SET_KEEPCAPS, _PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE = 24, 8, 38, 4
_CAPABILITY_VERSION_3 = 0x20080522
# A template's exit status when it had more than one thread before a fork.
UNSAFE_TO_FORK = 3
MB = 1024 * 1024
# A template's own start (its imports: torch alone is about 1.6 CPU s, more on a busy
# machine) is no kernel's: the template may use this many CPU seconds more than a kernel,
# and each kernel it forks takes the kernel's own limit back (``kernel_cpu_limit``; a
# forked process starts at 0 CPU seconds).
TEMPLATE_START_CPU = 120
# The sandbox's layout (``autograder.sandbox.bubblewrap`` binds them): the kernel's working folder,
# in its tmpfs, and the read-only folder the host filled for it.
WORK_DIR = "/tmp/work"
# This module's name, as ``python -m`` takes it (it follows a move of the file).
MODULE = __spec__.name if __spec__ is not None else __name__
STAGING_DIR = "/staging"


# A template's, in its own user namespace only: to give each kernel it forks mount, IPC and
# network namespaces of its own (kernel_template._own_namespaces). No kernel keeps them.
TEMPLATE_CAPS = ("--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN")


def nested_argv(bwrap: str, template: bool = False) -> list[str]:
    """The second, unprivileged bubblewrap: a user namespace that allows no other (and for
    a template, its two capabilities there)."""
    return [
        bwrap,
        "--unshare-user",
        "--disable-userns",
        *(TEMPLATE_CAPS if template else ()),
        "--dev-bind",
        "/",
        "/",
        "--die-with-parent",
        "--",
    ]


def apply_limits(limits: dict, template: bool = False) -> None:
    def cap(kind: int, value: int) -> None:
        if value > 0:
            resource.setrlimit(kind, (value, value))

    # The soft CPU limit sends SIGXCPU a little before the hard one's SIGKILL would.
    cpu = limits.get("cpu_seconds", 0)
    if cpu > 0:
        extra = TEMPLATE_START_CPU if template else 0
        resource.setrlimit(resource.RLIMIT_CPU, (cpu + extra, cpu + 5 + extra))
    cap(resource.RLIMIT_AS, limits.get("address_space_mb", 0) * MB)
    cap(resource.RLIMIT_NPROC, limits.get("max_processes", 0))
    cap(resource.RLIMIT_FSIZE, limits.get("max_file_mb", 0) * MB)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def kernel_cpu_limit() -> None:
    """In a kernel forked from a template: the kernel's CPU limit, not the template's."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    # A limit the grader set is the allowance above the kernel's; one at or under the
    # allowance was not raised and stays. An infinite hard limit stays infinite.
    if soft != resource.RLIM_INFINITY and soft > TEMPLATE_START_CPU:
        if hard != resource.RLIM_INFINITY:
            hard -= TEMPLATE_START_CPU
        resource.setrlimit(resource.RLIMIT_CPU, (soft - TEMPLATE_START_CPU, hard))


def start_pid_keeper() -> str:
    """For a template, as root, before root is dropped: a process in the sandbox's pid
    namespace that keeps one right only, to set the namespace's next pid
    (CAP_CHECKPOINT_RESTORE), and does one thing: for each byte the template sends, it
    sets the next pid to KERNEL_PID_BEFORE + 1 and answers "0" (done) or "1". So every
    kernel gets the same pid. It runs as nobody, not dumpable: no kernel can signal,
    trace or reach it, and one that could only make it set the same number. Returns the
    template's ends of the pipe, "request_fd,reply_fd"."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(request_w)
            os.close(reply_r)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)  # the template's pipes to the host are not the keeper's
            os.dup2(null, 1)
            _keep_pids(request_r, reply_w)
        finally:
            os._exit(0)
    os.close(request_r)
    os.close(reply_w)
    os.set_inheritable(request_w, True)
    os.set_inheritable(reply_r, True)
    return f"{request_w},{reply_r}"


def _keep_pids(request: int, reply: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        if cap != CAP_CHECKPOINT_RESTORE:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    # capset's data: effective, permitted, inheritable of capabilities 0-31, then of 32-63
    low, high = (1 << CAP_CHECKPOINT_RESTORE) & 0xFFFFFFFF, (1 << CAP_CHECKPOINT_RESTORE) >> 32
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(low, low, 0, high, high, 0)
    if libc.capset(header, data) != 0:
        return
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    while os.read(request, 1):
        try:
            fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY)
            try:
                os.write(fd, str(KERNEL_PID_BEFORE).encode())
            finally:
                os.close(fd)
            os.write(reply, b"0")
        except OSError:
            os.write(reply, b"1")


def drop_root(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("kernel_entry: could not drop root")


def make_socket_folder(argv: list[str]) -> None:
    """The folder the connection file names for the kernel's ipc sockets."""
    if "-f" in argv:
        with open(argv[argv.index("-f") + 1]) as f:
            info = json.load(f)
        if info.get("transport") == "ipc":
            os.makedirs(os.path.dirname(info["ip"]), mode=0o700, exist_ok=True)


def fill_work_dir(staging: str, work: str) -> None:
    """Copy the staged files (regular files and folders only) into the writable work dir."""
    os.makedirs(work, exist_ok=True)
    if os.path.isdir(staging):
        shutil.copytree(staging, work, symlinks=True, dirs_exist_ok=True)
    os.chdir(work)


def main() -> None:
    apply_limits(
        json.loads(os.environ.pop(LIMITS_ENV, "{}")), template=bool(os.environ.get(TEMPLATE_ENV))
    )
    uid = os.environ.pop(UID_ENV, "")
    if uid and os.environ.get(TEMPLATE_ENV):
        os.environ[PIDS_ENV] = start_pid_keeper()
    if uid:
        drop_root(int(uid))
    nest = os.environ.pop(NEST_ENV, "")
    if nest:
        argv = nested_argv(nest, template=bool(os.environ.get(TEMPLATE_ENV))) + [
            sys.executable,
            "-I",
            "-m",
            MODULE,
            *sys.argv[1:],
        ]
        os.execv(nest, argv)
    dirs = json.loads(os.environ.pop(DIRS_ENV, "{}"))
    if not dirs:  # in the sandbox (the host names the folders only outside it)
        from autograder.sandbox import seccomp

        seccomp.install()  # before a template's imports, so that every child has it
    kind = os.environ.pop(TEMPLATE_ENV, "")
    more = [name for name in os.environ.pop(PRELOAD_ENV, "").split(",") if name]
    if kind:
        from autograder.sandbox import kernel_template

        kernel_template.serve(kind, more)
        return
    make_socket_folder(sys.argv)
    fill_work_dir(dirs.get("staging", STAGING_DIR), dirs.get("work", WORK_DIR))
    # The instructor's pid means nothing in the sandbox's pid namespace; bwrap's
    # --die-with-parent already ends the kernel when the grader goes.
    os.environ.pop("JPY_PARENT_PID", None)
    from autograder.sandbox import kernel_app

    sys.argv[0] = "ipykernel_launcher"
    kernel_app.launch()


if __name__ == "__main__":
    main()
