"""What a kernel tries, in one cell, to pin memory its control group may not count: a
socket of each family, and each system call the filter refuses, called so that it would
succeed for an unprivileged process where the machine allows it (a perf event on its own
process, a user-mode-only userfaultfd, an unprivileged fanotify group, an io_uring, whose
``IORING_OP_SOCKET`` makes sockets no seccomp filter sees); and whether its loopback is
up. ``REFUSED`` is what a sandboxed kernel gets (``autograder.sandbox.seccomp``)."""

import errno

from autograder.sandbox import seccomp

TRY_UNCOUNTED = f"""
import ctypes, errno, fcntl, socket, struct
NR = {seccomp.numbers()!r}
def made(family, kind, proto=0):
    try:
        socket.socket(family, kind, proto).close()
        return 'made'
    except OSError as e:
        return errno.errorcode[e.errno]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def called(name, *args):
    return 'made' if libc.syscall(NR[name], *args) >= 0 else errno.errorcode[ctypes.get_errno()]
perf = bytearray(128)  # a software cpu-clock event, disabled, user space only
struct.pack_into('IIQ', perf, 0, 1, 128, 0)
struct.pack_into('Q', perf, 40, 1 | 32 | 64)
print({{
    'unix': made(socket.AF_UNIX, socket.SOCK_STREAM),
    'unix pair': len(socket.socketpair()),
    'inet': made(socket.AF_INET, socket.SOCK_STREAM),
    'inet6': made(socket.AF_INET6, socket.SOCK_DGRAM),
    'netlink usersock': made(socket.AF_NETLINK, socket.SOCK_RAW, 2),
    'netlink route': made(socket.AF_NETLINK, socket.SOCK_RAW, 0),
    'packet': made(socket.AF_PACKET, socket.SOCK_RAW),
    'perf_event_open': called('perf_event_open', (ctypes.c_char * 128).from_buffer(perf), 0, -1, -1, 0),
    'userfaultfd': called('userfaultfd', 1),  # UFFD_USER_MODE_ONLY
    'fanotify_init': called('fanotify_init', 0x200, 0),  # FAN_REPORT_FID, as a user may
    'io_uring_setup': called('io_uring_setup', 8, ctypes.create_string_buffer(120)),
    'bpf': called('bpf', 0, ctypes.create_string_buffer(128), 128),
    'memfd_secret': called('memfd_secret', 0),
    # SIOCGIFFLAGS, asked through a Unix socket: is lo's IFF_UP set?
    'loopback up': struct.unpack('16sh', fcntl.ioctl(socket.socket(socket.AF_UNIX), 0x8913,
                                                     struct.pack('16sh14x', b'lo', 0))[:18])[1] & 1,
}})
"""
REFUSED = {
    "unix": "made",
    "unix pair": 2,
    "inet": "EAFNOSUPPORT",
    "inet6": "EAFNOSUPPORT",
    "netlink usersock": errno.errorcode[errno.EOPNOTSUPP],  # ENOTSUP: the same number
    "netlink route": errno.errorcode[errno.EOPNOTSUPP],
    "packet": "EAFNOSUPPORT",
    **{name: errno.errorcode[error] for name, error in seccomp.REFUSED.items()},
}
