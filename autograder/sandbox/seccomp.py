"""A kernel can pin no kernel memory its control group does not count, nor set another
process's resource limits: a seccomp filter every sandboxed kernel (and every kernel
template, whose children inherit it) installs before anything of a notebook runs.
Standard library only: ``kernel_entry`` calls it before ipykernel is imported.

Threat: memory held in the machine's kernel on a kernel's behalf that its control group
never counts, nor the watchdog (which counts processes' memory and their tmpfs files).
Under cgroup v1 only TCP socket buffers can be charged to a group (``memory.kmem.tcp``);
every other family's queued buffers are the machine's. Outside attacks held 6.3 GiB in
netlink messages between a kernel's own sockets (26: ``NETLINK_USERSOCK``, no capability
needed), and 6.0-6.5 GB in perf ring buffers (27: ``perf_event_open``, mapped first by a
short-lived child whose locked-memory limit paid for them), beside a 4 GiB limit, and were
graded 30/30. A host survey (attack 27) found Unix socket buffers, pipes, System V message
queues, epoll and inotify charged to the group on this kernel; a kernel needs Unix sockets
(its ipc transport, multiprocessing, a DataLoader's workers) and pipes. It needs no other
socket family (it has no network: its namespace's loopback is down), and none of the
refused calls below: no lesson or graded exercise uses them (``torch.profiler`` records
CPU activity without perf events).

Contract:
- ``socket(2)`` and ``socketpair(2)`` with any family but ``AF_UNIX`` fail with
  ``EAFNOSUPPORT`` (as for a family the kernel was built without), so code that tries a
  socket and falls back keeps working; ``AF_NETLINK`` with ``EOPNOTSUPP``, as under WSL,
  whose missing netlink libzmq tolerates (its ``getifaddrs`` aborts the kernel on any
  other error, and every kernel's ipykernel asks for the loopback's address).
- ``prlimit64(2)`` on any process but the caller's own (pid 0, which is how glibc's
  ``getrlimit`` and ``setrlimit`` call it) fails with ``EPERM``. A kernel shares its uid
  with the template it was forked from, and Linux lets a process set the limits of any
  other of its uid: outside attack 59 lowered its template's soft CPU limit, so that
  every later kernel it forked was killed after 1 CPU s (an honest submission graded
  0/30), and passed a note to the next kernel in another limit. (``kernel_template``
  also checks its own limits before each fork.)
- ``REFUSED`` calls fail with the error the machine's own setting would give where it
  forbids them: ``perf_event_open`` (``perf_event_paranoid`` 3), ``bpf``, ``userfaultfd``,
  ``fanotify_init`` (not allowed), ``io_uring_setup`` (io_uring disabled; an io_uring's
  ``IORING_OP_SOCKET`` makes sockets no seccomp filter sees), ``memfd_secret`` (not built).
- A system call of another ABI than the machine's own (x32, or 32-bit ``int 0x80`` on
  x86_64), whose numbers the filter does not check, kills the process.
- ``install`` checks that the filter is in place (a netlink socket is refused) and raises
  ``OSError`` if not, or on a machine whose system call numbers it does not know: a
  kernel without it must not run. The filter outlives ``exec`` and is inherited by every
  child; nothing can remove it.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16  # args[0]'s low 32 bits (little-endian): the int family
# Each machine's audit arch and system call numbers (its unistd.h).
_ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NUMBERS = {
    "x86_64": {
        "socket": 41,
        "socketpair": 53,
        "prlimit64": 302,
        "perf_event_open": 298,
        "fanotify_init": 300,
        "bpf": 321,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "memfd_secret": 447,
    },
    "aarch64": {
        "socket": 198,
        "socketpair": 199,
        "prlimit64": 261,
        "perf_event_open": 241,
        "fanotify_init": 262,
        "bpf": 280,
        "userfaultfd": 282,
        "io_uring_setup": 425,
        "memfd_secret": 447,
    },
}
# Refused outright, each with the error a machine that forbids it gives.
REFUSED = {
    "perf_event_open": errno.EACCES,
    "fanotify_init": errno.EPERM,
    "bpf": errno.EPERM,
    "userfaultfd": errno.EPERM,
    "io_uring_setup": errno.EPERM,
    "memfd_secret": errno.ENOSYS,
}
_X32_BIT = 0x40000000  # x86_64's x32 system calls: the same numbers with this bit set
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def numbers(machine: str | None = None) -> dict[str, int]:
    """The system call numbers the filter checks, for ``machine`` (this one by default)."""
    machine = machine or platform.machine()
    if machine not in _NUMBERS:
        raise OSError(f"no system call filter for a {machine} machine: a kernel cannot run here")
    return _NUMBERS[machine]


def program(machine: str | None = None) -> bytes:
    """The filter's classic BPF, for ``machine`` (``platform.machine()`` by default)."""
    machine = machine or platform.machine()
    nr = numbers(machine)
    ops = [(_LD_W_ABS, _ARCH), (_JEQ_K, _ARCHES[machine], 1, 0), (_RET_K, _KILL_PROCESS)]
    ops.append((_LD_W_ABS, _NR))
    if machine == "x86_64":
        ops += [(_JGE_K, _X32_BIT, 0, 1), (_RET_K, _KILL_PROCESS)]
    for name, error in REFUSED.items():
        ops += [(_JEQ_K, nr[name], 0, 1), (_RET_K, _ERRNO | error)]
    ops += [
        (_JEQ_K, nr["prlimit64"], 0, 4),  # not prlimit64: on to the sockets
        (_LD_W_ABS, _ARG0),  # the pid (a pid_t: its low 32 bits are all the kernel reads)
        (_JEQ_K, 0, 0, 1),
        (_RET_K, _ALLOW),  # 0: this process's own limits
        (_RET_K, _ERRNO | errno.EPERM),
    ]
    ops += [
        (_JEQ_K, nr["socket"], 1, 0),
        (_JEQ_K, nr["socketpair"], 0, 5),  # neither: allowed
        (_LD_W_ABS, _ARG0),  # the family
        (_JEQ_K, socket.AF_UNIX, 3, 0),
        (_JEQ_K, socket.AF_NETLINK, 0, 1),
        (_RET_K, _ERRNO | errno.EOPNOTSUPP),
        (_RET_K, _ERRNO | errno.EAFNOSUPPORT),
        (_RET_K, _ALLOW),
    ]
    return b"".join(_op(*op) for op in ops)


def install() -> None:
    """Install the filter in this process (and so in everything it starts), and check it."""
    code = program()
    libc = ctypes.CDLL(None, use_errno=True)
    # Without capabilities a filter needs no_new_privs; a kernel has both anyway.
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "no_new_privs could not be set")
    prog = _Program(len(code) // 8, code)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the system call filter could not be installed")
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2).close()
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            return
    raise OSError("the system call filter is not in force: a kernel must not run")
