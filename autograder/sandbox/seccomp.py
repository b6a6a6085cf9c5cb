"""A kernel makes no socket but a Unix one: a seccomp filter every sandboxed kernel (and
every kernel template, whose children inherit it) installs before anything of a notebook
runs. Standard library only: ``kernel_entry`` calls it before ipykernel is imported.

Threat: memory the kernel's control group never counts. Under cgroup v1 only TCP socket
buffers can be charged to a group (``memory.kmem.tcp``); every other family's queued
buffers are the machine's. An outside attack (26) sent 1 MiB netlink messages
(``NETLINK_USERSOCK``, no capability needed, no network either) between 458 pairs of a
kernel's own sockets with raised receive buffers and held 6.3 GiB beside a 4 GiB limit,
seen by neither the group nor the watchdog, and was graded 30/30. Unix sockets' buffers
are charged to the group on this kernel (a host check in a 512 MiB group was killed at
its limit), and a kernel needs them: its ipc transport, multiprocessing, a DataLoader's
workers. It needs no other family: it has no network (its namespace's loopback is down).

Contract:
- ``socket(2)`` and ``socketpair(2)`` with any family but ``AF_UNIX`` fail with
  ``EAFNOSUPPORT`` (as for a family the kernel was built without), so code that tries a
  socket and falls back keeps working; ``AF_NETLINK`` with ``EOPNOTSUPP``, as under WSL,
  whose missing netlink libzmq tolerates (its ``getifaddrs`` aborts the kernel on any
  other error, and every kernel's ipykernel asks for the loopback's address).
- ``io_uring_setup(2)`` fails with ``EPERM`` (as where io_uring is disabled): an
  io_uring's ``IORING_OP_SOCKET`` makes sockets no seccomp filter sees.
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
# The machine's audit arch, and its numbers for socket, socketpair, io_uring_setup.
_ABIS = {
    "x86_64": (0xC000003E, 41, 53, 425),
    "aarch64": (0xC00000B7, 198, 199, 425),
}
_X32_BIT = 0x40000000  # x86_64's x32 system calls: the same numbers with this bit set
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes:
    """The filter's classic BPF, for ``machine`` (``platform.machine()`` by default)."""
    machine = machine or platform.machine()
    if machine not in _ABIS:
        raise OSError(f"no socket filter for a {machine} machine: a kernel cannot run here")
    arch, nr_socket, nr_socketpair, nr_io_uring_setup = _ABIS[machine]
    ops = [(_LD_W_ABS, _ARCH), (_JEQ_K, arch, 1, 0), (_RET_K, _KILL_PROCESS), (_LD_W_ABS, _NR)]
    if machine == "x86_64":
        ops += [(_JGE_K, _X32_BIT, 0, 1), (_RET_K, _KILL_PROCESS)]
    ops += [
        (_JEQ_K, nr_socket, 3, 0),
        (_JEQ_K, nr_socketpair, 2, 0),
        (_JEQ_K, nr_io_uring_setup, 7, 0),
        (_RET_K, _ALLOW),
        (_LD_W_ABS, _ARG0),  # socket or socketpair: its family
        (_JEQ_K, socket.AF_UNIX, 0, 1),
        (_RET_K, _ALLOW),
        (_JEQ_K, socket.AF_NETLINK, 0, 1),
        (_RET_K, _ERRNO | errno.EOPNOTSUPP),
        (_RET_K, _ERRNO | errno.EAFNOSUPPORT),
        (_RET_K, _ERRNO | errno.EPERM),  # io_uring_setup
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
        raise OSError(ctypes.get_errno(), "the socket filter could not be installed")
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2).close()
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            return
    raise OSError("the socket filter is not in force: a kernel must not run")
