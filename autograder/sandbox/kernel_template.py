"""A kernel template: one process that imports what every kernel of its kind needs, never
runs a cell, and forks a fresh kernel for each submission.

Two kinds (``PRELOAD``): a **test** kernel's template and a **student** kernel's template.
Each runs inside its kernel's sandbox, after ``autograder.sandbox.kernel_entry`` has applied the
limits, dropped root and entered the second bubblewrap: its limits and identity are
already the kernel's, and every child inherits them (but CPU: the template may spend
``TEMPLATE_START_CPU`` seconds more on its own start, and each child takes the kernel's
limit back before anything else). It imports ipykernel, IPython,
torch and NumPy (and, for a test kernel, the grader's trusted side), so that no kernel
pays for them per submission (``import torch`` alone is about 1.6 CPU s).

Contract (the host's side is ``autograder.worker.trusted_kernel``):
- The template says ``ready`` on its standard output (a pipe to the host) once it has
  imported what it preloads.
- The host writes one request a line on the template's standard input, a JSON object
  ``{"connection": {...}, "staging": NAME}``: a Jupyter connection file's contents (ipc
  transport, new ports and a new key for every child) and, optionally, the subfolder of
  the read-only staging folder that holds this submission's files. Only the grader
  holds that pipe.
- For each request the template first ends everything of the kernel before: it kills
  every other process of its uid in the sandbox's pid namespace (but its own ancestors)
  until none is left, empties the sandbox's writable folders (``/tmp``, ``/dev/shm``,
  and ``/dev/mqueue``, its own POSIX message queues; a folder made read-only is made
  writable first), removes its System V IPC objects, empties its uid's keyrings (user,
  user-session and persistent), checks that no socket is left in the sandbox's network
  namespace (a closed TCP connection lingers there for a minute, its ports readable), and
  that its own resource limits, nice value, scheduling policy and CPUs are still those it
  started with (a kernel shares its uid; the system call filter keeps any kernel from
  setting another process's limits).
  Then it has the pid keeper (``kernel_entry.start_pid_keeper``) set the pid counter, so
  that every kernel gets the same pid and none can leave the next a number in it. The
  child makes mount, IPC and network namespaces of its own, with a new /tmp, /dev/shm and
  /dev/mqueue (``_own_namespaces``), then drops every capability, before anything of the
  kernel runs: nothing it leaves there, counters included, reaches the next kernel.
  If anything is left, it exits with ``CANNOT_CLEAN`` and the host starts a new template
  in a new sandbox. Then it forks one child and says ``forked <n> <pid>``, ``n`` the
  fork's number (1, 2, ...): a kernel can use up the sandbox's pids until the next child
  gets its own pid back, so a pid names no kernel for long, a number does. The child fills
  its working folder from the staging folder, writes its connection file, closes every
  descriptor of the template's (its standard output and error become /dev/null: the
  template's log is a host file that outlives the kernel) and becomes an ipykernel. It
  serves one submission and is killed by the host after it, with every process it started.
- When a child ends, the template says ``exit <n> <pid> <status> <cpu>`` on its standard
  output (its fork's number, the pid as the sandbox numbers it, the status as
  ``subprocess`` gives it, the
  CPU seconds it used), so that a kernel killed by its CPU limit is told apart from one
  that crashed, or that chose the same status.
- Nothing of a child reaches the template or a later child: memory is the template's,
  copy-on-write; the template is not dumpable (``PR_SET_DUMPABLE`` 0), so no child,
  which holds no capability, can ptrace it or open its ``/proc/<pid>/mem``; processes,
  files and IPC objects are ended before each child starts; the template never reads
  anything a child wrote. A child can still signal the template (same uid, same pid namespace): that
  stops only the template, and the host starts a new one. So no process ever holds two
  submissions' data.
- Fork safety: the template starts no thread (torch's and OpenMP's pools, zmq contexts
  are made only in the child; ``OMP_NUM_THREADS=1`` keeps torch's import from starting
  one). Before each fork it checks that it has one thread; if not, it exits with
  ``UNSAFE_TO_FORK``, and the host starts test kernels without a template and says so.
- Garbage collection, as Python's ``gc.freeze`` documents for a process that forks without
  exec: off while the template imports (about 0.15 CPU s of its start), and everything the
  template holds frozen before each fork, so that a child's collections never walk the
  template's objects (a full walk of them is about 0.1 CPU s, and writes to every page the
  child shares with the template); the child turns collection on again.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import json
import os
import re
import signal
import stat
import sys
import time
from collections.abc import Sequence

from autograder.bridge import plaindata, protocol
from autograder.sandbox.kernel_entry import (
    MODULE_NAME,
    PIDS_ENV,
    STAGING_DIR,
    UNSAFE_TO_FORK,
    WORK_DIR,
    fill_work_dir,
    kernel_cpu_limit,
)
from autograder.sandbox.procs import live_threads

_BRIDGE = plaindata.__name__.rpartition(".")[0]  # the bridge's package (follows a move)
_COMMON = (
    "ipykernel.kernelapp",
    f"{__spec__.parent}.kernel_app",  # the kernels' application (autograder.sandbox)
    "ipykernel.ipkernel",
    # What a kernel's own start imports (its debugger, its history's sqlite3, pdb): about
    # 0.04 CPU s of every kernel's start, two kernels a submission.
    "ipykernel.debugger",
    "sqlite3",
    "pdb",
    "tornado.queues",
    "tornado.platform.asyncio",
    "IPython",
    # What a kernel's shell imports as it starts (its inspector, completer, debugger and
    # %store magic) and what its first traceback does (stack_data): about 0.01 CPU s a kernel.
    "IPython.core.oinspect",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.extensions.storemagic",
    "stack_data",
    "numpy",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.utils.data",
    plaindata.__name__,
)
# What each kind of template imports before its first fork: what every kernel of that
# kind imports (a student's notebook starts with ``import torch``; the bridge's student
# side answers every test's call).
PRELOAD = {
    "test": _COMMON + (f"{_BRIDGE}.trusted_side", f"{_BRIDGE}.tests_kernel"),
    "student": _COMMON + (f"{_BRIDGE}.student_side", f"{_BRIDGE}.student_kernel"),
}
# What each kind's kernel adds to ipykernel's command line: a student's kernel answers the
# bridge's requests as messages of their own (``autograder.bridge.student_kernel``), a test
# kernel reads the answers in a test cell's own request (``autograder.bridge.tests_kernel``).
KERNEL_OPTIONS = {
    "test": [protocol.TESTS_KERNEL_OPTION],
    "student": [protocol.STUDENT_KERNEL_OPTION],
}
WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")  # /dev/mqueue: its POSIX message queues
_STAGING_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PR_SET_DUMPABLE = 4
IPC_RMID = 0
_BASELINE: set[str] = set()  # what the sandbox put in WRITABLE: its mount points
# pid -> its fork's number, until the child is reaped (till then no process can take its pid)
_CHILDREN: dict[int, int] = {}
_FORKS = [0]  # how many children it has forked
_KIND = ["test"]  # which kind of kernel it forks
_BASELINE_STATE: dict[str, tuple[int, frozenset[str]]] = {}  # their modes and xattr names
CHASE = 400  # looks at the pid namespace before a chain of forks is given up on
CANNOT_CLEAN = 75  # the template's exit status when an earlier kernel left something


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def preload(kind: str, more: Sequence[str] = ()) -> None:
    """Import what every kernel of ``kind`` imports, and ``more``: the modules the
    instructor's ``Sandbox.template_preload`` names for this assignment (a name is checked
    again here: only a dotted module name is imported)."""
    import importlib

    for name in (*PRELOAD[kind], *more):
        if not MODULE_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a module name")
        importlib.import_module(name)


def _reap(signum, frame) -> None:
    """Reap every ended kernel and tell the host how each ended, and the CPU seconds it
    had used: an exit status alone is the kernel's to choose (``os._exit(152)`` reads as
    a kill at the CPU-time limit)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        number = _CHILDREN.pop(pid, None)
        if number is None:  # not a kernel this template forked
            continue
        cpu = usage.ru_utime + usage.ru_stime
        code = os.waitstatus_to_exitcode(status)
        try:
            os.write(1, f"exit {number} {pid} {code} {cpu:.2f}\n".encode())
        except OSError:
            pass


def serve(kind: str = "test", more: Sequence[str] = ()) -> None:
    """Fork one kernel per request line until the host closes the pipe."""
    # What the sandbox put in the writable folders, before the imports: whatever an import
    # leaves there (torch._dynamo makes /tmp/torchinductor_<user>) is removed below, as
    # any kernel's would be, so that no kernel can keep a file in it for the next.
    for folder in WRITABLE:
        _BASELINE.update(_tree(folder))
    for path in [*WRITABLE, *_BASELINE]:
        _BASELINE_STATE[path] = _state(path)
    _KEYRINGS[0] = _keyrings_answer()
    _NAMESPACES[0] = _can_give_namespaces()
    _KIND[0] = kind
    pids = os.environ.pop(PIDS_ENV, "")
    if pids:
        _PIDS.extend(int(fd) for fd in pids.split(","))
    gc.disable()
    preload(kind, more)
    gc.freeze()  # what it imported: never walked again, here or in a kernel
    gc.enable()
    _SOCKETS.update(_sockets())  # its own, should an import have made one
    _OWN_SETTINGS.update(_settings())
    for folder in WRITABLE:
        _empty(folder)
    # No child may ptrace the template or read its memory through /proc: it would reach
    # every later child from there.
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.stderr.write("kernel_template: could not make the template undumpable\n")
        os._exit(1)
    signal.signal(signal.SIGCHLD, _reap)
    os.write(1, b"ready\n")  # to the host, on a pipe of its own
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            break
        if threads() != 1:
            sys.stderr.write(f"kernel_template: {threads()} threads; forking is not safe\n")
            sys.stderr.flush()
            os._exit(UNSAFE_TO_FORK)
        request = json.loads(line)
        staging = request.get("staging") or ""
        if staging and not _STAGING_NAME.fullmatch(staging):
            sys.stderr.write("kernel_template: a staging folder must be a plain name\n")
            continue
        problem = _end_earlier_kernels() or _next_pid()
        if problem:  # the host sees the template end, and starts a new one (a new sandbox)
            sys.stderr.write(f"kernel_template: {problem}; a new template must serve\n")
            sys.stderr.flush()
            os._exit(CANNOT_CLEAN)
        # No reaping between the fork and its number: a child that ends at once is still
        # told by its number, after its "forked" line.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            try:
                _become_kernel(request["connection"], staging)
            except BaseException as exc:  # noqa: BLE001 - said in the log, then the child ends
                sys.stderr.write(f"kernel_template: a kernel could not be set up: {exc!r}\n")
            finally:
                os._exit(1)
        _FORKS[0] += 1
        _CHILDREN[pid] = number = _FORKS[0]
        os.write(1, f"forked {number} {pid}\n".encode())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    os._exit(0)


_PIDS: list[int] = []  # the pipe to the pid keeper (kernel_entry.start_pid_keeper), if any


def _next_pid() -> str:
    """Have the pid keeper set the next kernel's pid, the same as every kernel's; or why it
    cannot be. Without a keeper (a sandbox not started as root) a template serves one
    kernel only: each kernel after the first gets a new sandbox, whose pid counter no
    kernel has moved."""
    if not _NAMESPACES[0] and _FORKS[0]:
        return "no namespaces of its own for the next kernel here"
    if not _PIDS:
        return "no pid keeper here to give the next kernel a pid of its own" if _FORKS[0] else ""
    try:
        os.write(_PIDS[0], b"p")
        answer = os.read(_PIDS[1], 1)
    except OSError as exc:
        return f"the pid keeper did not answer ({type(exc).__name__})"
    return "" if answer == b"0" else "the pid keeper could not set the next pid"


def _end_earlier_kernels() -> str:
    """Before a fork: no process of an earlier kernel left, and nothing it wrote in the
    sandbox's writable folders or its System V IPC; else what is left, in words.

    Every process of this uid in the sandbox's pid namespace but the template and its
    ancestors (the unprivileged bubblewrap) is killed, and the namespace is looked at
    again until two looks in a row find none. A chain of processes that fork and exit
    can stay ahead of that for a while: if it does past ``CHASE`` looks, the template gives
    up (the host then ends its whole sandbox, whose pid namespace takes every process
    with it). A folder an earlier kernel made read-only is its own (same uid): it is
    made writable again before it is emptied."""
    if not _in_sandbox_pid_namespace():
        return "not in a pid namespace of its own, where only kernels run as its uid"
    keep = _ancestors()
    quiet = 0
    for _ in range(CHASE):
        found = _other_processes(keep)
        quiet = 0 if found else quiet + 1
        if quiet == 2:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    else:
        return "processes of an earlier kernel kept starting new ones"
    try:
        for folder in WRITABLE:
            _empty(folder)
            left = _tree(folder, strict=True) - _BASELINE
            if left:
                return (
                    f"{folder} could not be emptied ({len(left)} left: {sorted(left)[:3]!r:.200})"
                )
        changed = _restore_baseline()
        if changed:
            return f"{changed} could not be put back as the sandbox made it"
    except Exception as exc:  # noqa: BLE001 - whatever an earlier kernel left: a new sandbox
        return f"the writable folders could not be checked ({type(exc).__name__})"
    return _remove_ipc() or _clear_keyrings() or _sockets_left() or _settings_changed()


_OWN_SETTINGS: dict[str, object] = {}  # the template's limits and scheduling, before any kernel


def _settings() -> dict[str, object]:
    """What a child inherits of the template's own settings: every resource limit, its
    nice value, scheduling policy and CPUs."""
    import resource

    found: dict[str, object] = {
        name: resource.getrlimit(getattr(resource, name))
        for name in dir(resource)
        if name.startswith("RLIMIT_")
    }
    found["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    found["policy"] = os.sched_getscheduler(0)
    found["cpus"] = sorted(os.sched_getaffinity(0))
    return found


def _settings_changed() -> str:
    """A kernel shares the template's uid, and Linux lets a process of one uid set
    another's limits: the system call filter refuses it (``seccomp``), and this says so
    should anything else have changed what the next kernel would inherit (outside attack
    59 gave every later kernel a CPU limit of 1 s)."""
    changed = sorted(k for k, v in _settings().items() if _OWN_SETTINGS.get(k) != v)
    return f"its own limits or scheduling were changed ({', '.join(changed)})" if changed else ""


# The sandbox's network namespace is the template's, shared by every kernel it forks, one
# after another. A socket outlives its kernel there: a closed TCP connection waits 60 s in
# TIME_WAIT, and its addresses and ports are numbers the next kernel can read in
# /proc/net/tcp. Each table's column of the socket's inode (0 for one no process holds).
SOCKET_TABLES = {
    **dict.fromkeys(("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6"), 9),
    "unix": 6,
    "packet": 8,
}
_SOCKETS: set[tuple[str, str]] = set()  # the template's own, before any kernel ran


def _sockets() -> set[tuple[str, str]]:
    """Every socket in this network namespace: (table, inode); "0" for each one no process
    holds any more, numbered, so that two of them are two."""
    found = set()
    for table, column in SOCKET_TABLES.items():
        try:
            with open(f"/proc/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for index, row in enumerate(rows):
            fields = row.split()
            inode = fields[column] if len(fields) > column else "?"
            found.add((table, inode if inode not in ("0", "?") else f"{inode}#{index}"))
    return found


def _sockets_left() -> str:
    """Whether an earlier kernel left a socket behind (after its processes were killed):
    any socket the template did not hold before its first kernel. Only a new sandbox, with
    a network namespace of its own, is then clean."""
    try:
        left = _sockets() - _SOCKETS
    except (OSError, ValueError) as exc:
        return f"the sandbox's sockets could not be read ({type(exc).__name__})"
    if left:
        tables = sorted({table for table, _ in left})
        return f"{len(left)} socket(s) of an earlier kernel are left ({', '.join(tables)})"
    return ""


# keyctl's number, by machine: a kernel's keys live in its uid's keyrings, which outlive it.
KEYCTL = {"x86_64": 250, "aarch64": 219}
KEYCTL_GET_KEYRING_ID, KEYCTL_SETPERM, KEYCTL_CLEAR, KEYCTL_UNLINK = 0, 5, 7, 9
KEYCTL_GET_PERSISTENT = 22
OWNER_ALL = 0x3F3F0000  # possessor and owner may do all; group and others nothing
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5
NO_KEYRINGS = (errno.ENOSYS, errno.EPERM, errno.EACCES, errno.EOPNOTSUPP)


def _clear_keyrings() -> str:
    """Empty this uid's keyrings that outlive a kernel: its user and user-session keyrings,
    its persistent keyring (kept for days after the uid's last process), and the
    template's own session keyring, which every kernel it forks inherits. An earlier
    kernel's keys would reach the next kernel there: outside attackers passed notes that
    way. A keyring a kernel took the template's rights off (they share a uid) is given
    them back first. Where the kernel has no keyrings at all (no such system call, or
    refused), no kernel could add a key to one."""
    number = KEYCTL.get(os.uname().machine)
    if number is None:
        return f"keyrings cannot be emptied on {os.uname().machine}"
    libc = ctypes.CDLL(None, use_errno=True)
    # Whether the keyrings answered the template before any kernel ran: then a refusal, or
    # a keyring not found, now is a kernel's doing (it took the template's rights off a
    # keyring of their uid).
    refused = NO_KEYRINGS + (errno.ENOKEY,) if not _KEYRINGS[0] else ()
    # Linked into the template's session keyring, so that it holds the persistent keyring
    # (a key's owner may empty it only then), and unlinked once it is empty.
    kept = libc.syscall(number, KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_SESSION_KEYRING)
    # (Persistent keyrings are a kernel option: one without them is not a refusal.)
    if kept < 0 and ctypes.get_errno() not in (*refused, errno.ENOSYS, errno.EOPNOTSUPP):
        return f"the persistent keyring could not be found ({os.strerror(ctypes.get_errno())})"
    if kept > 0:
        emptied = libc.syscall(number, KEYCTL_CLEAR, kept) == 0
        libc.syscall(number, KEYCTL_UNLINK, kept, KEY_SPEC_SESSION_KEYRING)
        if not emptied:
            return (
                f"the persistent keyring could not be emptied ({os.strerror(ctypes.get_errno())})"
            )
    for ring in (KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
        found = libc.syscall(number, KEYCTL_GET_KEYRING_ID, ring, 0)
        if found < 0:
            if ctypes.get_errno() in refused:
                continue  # none here: no kernel could have added a key to it
            return f"a keyring could not be found ({os.strerror(ctypes.get_errno())})"
        libc.syscall(number, KEYCTL_SETPERM, found, OWNER_ALL)  # its owner may, always
        if libc.syscall(number, KEYCTL_CLEAR, found) != 0:
            return f"a keyring could not be emptied ({os.strerror(ctypes.get_errno())})"
    return ""


_KEYRINGS = [False]  # whether this uid's keyrings answered before any kernel ran


def _keyrings_answer() -> bool:
    number = KEYCTL.get(os.uname().machine)
    if number is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    # create=1: a keyring may not exist yet; making it now is harmless, and afterwards a
    # keyring that is not found was hidden from the template (no search right: ENOKEY).
    rings = (KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING)
    return all(libc.syscall(number, KEYCTL_GET_KEYRING_ID, ring, 1) >= 0 for ring in rings)


def _in_sandbox_pid_namespace() -> bool:
    """Whether pid 1 here is bubblewrap's: then this is the sandbox's pid namespace."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0")[0]) == b"bwrap"
    except OSError:
        return False


def _status(pid: int) -> dict:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f if ":" in line)


def _ancestors() -> set[int]:
    """The template and the processes above it, up to the namespace's init (pid 1: it
    runs as this uid where the grader is not root, and is never signalled from inside)."""
    found, pid = {1}, os.getpid()
    while pid > 1:
        found.add(pid)
        try:
            pid = int(_status(pid)["PPid"])
        except (OSError, KeyError, ValueError):
            break
    return found


def _other_processes(keep: set[int]) -> list[int]:
    """Live processes of this uid in the pid namespace, but those in ``keep``."""
    uid, found = os.getuid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in keep:
            continue
        try:
            status = _status(int(name))
        except OSError:
            continue
        if status.get("State", "").split()[:1] == ["Z"] and not live_threads(int(name)):
            continue  # ended: its parent has yet to reap it
        if int(status.get("Uid", "-1").split()[0]) == uid:
            found.append(int(name))
    return found


def _remove_ipc() -> str:
    """Remove every System V shared memory segment, message queue and semaphore set of
    the sandbox's IPC namespace (a kernel's data would outlive it there)."""
    libc = ctypes.CDLL(None, use_errno=True)
    removers = {
        "shm": lambda i: libc.shmctl(i, IPC_RMID, None),
        "msg": lambda i: libc.msgctl(i, IPC_RMID, None),
        "sem": lambda i: libc.semctl(i, 0, IPC_RMID),
    }
    for kind, remove in removers.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.split()]
        except OSError:
            continue
        for ipc_id in ids:
            if remove(ipc_id) != 0:
                return f"a System V IPC object ({kind} {ipc_id}) could not be removed"
    return ""


# A kernel's namespaces of its own (see _own_namespaces); the template's two capabilities,
# in its own user namespace only, that make them, and that no kernel keeps.
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x20000, 0x8000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 2, 4, 4096, 8192, 1 << 14, 1 << 18
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_SIZES: dict[str, int] = {}  # /tmp's and /dev/shm's sizes in bytes, as the sandbox made them
_NAMESPACES = [False]  # whether each kernel gets namespaces of its own here


def _capabilities() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("CapEff:")).split()[1], 16)


def _can_give_namespaces() -> bool:
    """Whether this template may give each kernel namespaces of its own: it holds, in its
    own user namespace, the two capabilities the sandbox gives a template for that."""
    for folder in ("/tmp", "/dev/shm"):
        st = os.statvfs(folder)
        _SIZES[folder] = st.f_blocks * st.f_frsize
    need = (1 << CAP_SYS_ADMIN) | (1 << CAP_NET_ADMIN)
    return _capabilities() & need == need


def _mounts_under(folder: str) -> list[str]:
    """The outermost mount points below ``folder`` (a course's .venv bound under /tmp)."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
            if point.startswith(folder + "/"):
                points.append(point)
    return [p for p in sorted(points) if not any(p.startswith(q + "/") for q in points)]


def _own_namespaces() -> None:
    """In a forked child, before anything of the kernel runs: mount, IPC and network
    namespaces of its own (no network at all: not even its loopback), with a new tmpfs at
    /tmp and /dev/shm (the sandbox's sizes) and a new /dev/mqueue. What a kernel leaves in
    its namespaces, counters included (System V IPC ids, tmpfs inode numbers, network
    statistics: an eighteenth outside attack read each as a note), goes with it; the next
    kernel starts in new ones. Bind mounts under /tmp (a course's .venv under /tmp) are
    carried over into the new /tmp."""
    libc = ctypes.CDLL(None, use_errno=True)

    def done(result: int, what: str) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what} failed")

    done(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET), "unshare")
    done(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    # The new /tmp is made on /staging (the only folder free to cover for a moment), gets
    # the binds under the old /tmp, then moves to /tmp; /staging shows its files again.
    below = _mounts_under("/tmp")
    options = f"size={_SIZES['/tmp']},mode=1777".encode()
    done(
        libc.mount(b"tmpfs", STAGING_DIR.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), "tmpfs"
    )
    for point in below:
        inside = STAGING_DIR + point[len("/tmp") :]
        if os.path.isdir(point):
            os.makedirs(inside, mode=0o755, exist_ok=True)
        else:  # a file bound on its own (a connection file): a file to mount it on
            os.makedirs(os.path.dirname(inside), mode=0o755, exist_ok=True)
            os.close(os.open(inside, os.O_WRONLY | os.O_CREAT, 0o600))
        done(libc.mount(point.encode(), inside.encode(), None, MS_BIND | MS_REC, None), point)
    done(libc.mount(STAGING_DIR.encode(), b"/tmp", None, MS_MOVE, None), "moving /tmp")
    options = f"size={_SIZES['/dev/shm']},mode=1777".encode()
    done(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, options), "/dev/shm")
    done(libc.mount(b"mqueue", b"/dev/mqueue", b"mqueue", MS_NOSUID | MS_NODEV, None), "mqueue")
    # The new network namespace's loopback stays down: a kernel has no TCP or UDP at all.
    # Its messages go through Unix sockets (the ipc transport), whose buffers a control
    # group counts; unread loopback TCP buffers it does not count under cgroup v1, and one
    # kernel held 1.8 GB there beside 3 GB of counted memory (attack 25), taking 81% of the
    # machine's TCP memory from every other TCP socket on it.


def _drop_capabilities() -> None:
    """A kernel holds no capability in any set; else it must not run."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    libc.capset(header, (ctypes.c_uint32 * 6)())  # effective, permitted, inheritable: none
    with open("/proc/self/status") as f:
        sets = [
            line.split()[1]
            for line in f
            if line.startswith(("CapInh", "CapPrm", "CapEff", "CapAmb"))
        ]
    if any(int(value, 16) for value in sets):
        raise OSError("a kernel must hold no capability")


def _become_kernel(connection: dict, staging: str = "") -> None:
    gc.enable()
    for fd in _PIDS:  # the pid keeper is the template's to ask, never a kernel's
        os.close(fd)
    if _NAMESPACES[0]:
        _own_namespaces()
    _drop_capabilities()
    kernel_cpu_limit()
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # a kernel waits for its own children
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})  # blocked for the fork
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the template's requests and its pipe to the host are not the kernel's
    os.close(null)
    os.dup2(2, 1)  # the set-up's own words (a failure, below) go to the template's log
    path = os.path.join(os.path.dirname(connection["ip"]), "kernel.json")
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(connection, f)
    fill_work_dir(os.path.join(STAGING_DIR, staging) if staging else STAGING_DIR, WORK_DIR)
    os.environ.pop("JPY_PARENT_PID", None)
    _hold_nothing_of_the_template()
    from autograder.sandbox import kernel_app

    # As nbclient starts every kernel: no history file (a new sqlite database per kernel).
    sys.argv = [
        "ipykernel_launcher",
        "-f",
        path,
        "--HistoryManager.hist_file=:memory:",
        *KERNEL_OPTIONS[_KIND[0]],
    ]
    kernel_app.launch()


def _hold_nothing_of_the_template() -> None:
    """Last, before the kernel's first line: its standard output and error go to
    /dev/null, and it keeps no other descriptor of the template's. The template's log is
    a host file that outlives every kernel it forks; a kernel that held it, even write-only,
    passed a note to the next (outside attack 56: holes punched in it, or its size, read
    back with lseek and fstat) or filled it to the file-size limit, so that the next kernel
    could not start from the template. What the kernel prints goes to the notebook as
    ipykernel captures it; ipykernel's own log lines, which no one reads, go nowhere."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))


def _tree(folder: str, strict: bool = False) -> set[str]:
    """Every path under ``folder`` on its own file system (never following a link, nor
    into a read-only mount such as a course under /tmp), walked without recursion (a
    kernel may nest folders thousands deep). ``strict``: a folder that cannot be listed
    is an error, never an empty one (a kernel can take the read bit off its own)."""
    found: set[str] = set()
    stack, device = [folder], os.lstat(folder).st_dev
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            if strict:
                raise
            continue
        for entry in entries:
            found.add(entry.path)
            if _same_fs_dir(entry, device):
                stack.append(entry.path)
    return found


def _same_fs_dir(entry: os.DirEntry, device: int) -> bool:
    """Whether ``entry`` is a folder on the file system ``device`` (a writable tmpfs): what
    a kernel can have written. A mount point in it (the sandbox's read-only binds) is
    listed, never entered."""
    try:
        return entry.is_dir(follow_symlinks=False) and (
            entry.stat(follow_symlinks=False).st_dev == device
        )
    except OSError:
        return False


def _empty(folder: str) -> None:
    """Remove everything in ``folder`` that was not there when the template started (the
    sandbox's own mount points for its read-only files stay), never following a link and
    without recursion; every folder is made writable and listable first: a kernel may
    have taken those bits off its own folders."""
    stack, listed, device = [folder], [], os.lstat(folder).st_dev
    while stack:
        current = stack.pop()
        if current not in _BASELINE and current != folder:
            try:
                os.chmod(current, 0o700)  # a folder, never a link: scandir said so
            except OSError:
                pass
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        listed.append(entries)
        stack.extend(e.path for e in entries if _same_fs_dir(e, device))
    # Deepest first: each folder is empty by the time it is removed.
    for entries in reversed(listed):
        for entry in entries:
            if entry.path in _BASELINE:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    os.rmdir(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _state(path: str) -> tuple[int, frozenset[str]]:
    """A baseline path's mode and the names of its extended attributes."""
    mode = os.lstat(path).st_mode & 0o7777
    try:
        names = frozenset(os.listxattr(path, follow_symlinks=False))
    except OSError:
        names = frozenset()
    return mode, names


def _restore_baseline() -> str:
    """Put each writable folder and mount point back as the sandbox made it: its mode, and
    no extended attribute it did not have (a kernel can keep gigabytes of ``user.*``
    attributes on a folder it owns, charged to the next kernel's memory). The first path
    that cannot be put back, or ""."""
    for path, (mode, names) in _BASELINE_STATE.items():
        try:
            now = os.lstat(path).st_mode
            if stat.S_ISLNK(now):
                continue  # Linux has no mode for a link
            if now & 0o7777 != mode:
                os.chmod(path, mode)
            for name in set(os.listxattr(path, follow_symlinks=False)) - names:
                os.removexattr(path, name, follow_symlinks=False)
        except FileNotFoundError:
            return path
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.ENOTSUP, errno.EPERM):
                continue  # a read-only mount point: no kernel could change it either
            return path
    return ""
