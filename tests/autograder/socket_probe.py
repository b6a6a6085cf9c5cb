"""What a kernel tries, in one cell, to hold memory its control group may not count: a
socket of each family, an io_uring (whose ``IORING_OP_SOCKET`` makes sockets no seccomp
filter sees), and whether its loopback is up. ``REFUSED`` is what a sandboxed kernel gets
(``autograder.sandbox.seccomp``)."""

import errno

TRY_SOCKETS = """
import ctypes, errno, fcntl, socket, struct
def made(family, kind, proto=0):
    try:
        socket.socket(family, kind, proto).close()
        return 'made'
    except OSError as e:
        return errno.errorcode[e.errno]
libc = ctypes.CDLL(None, use_errno=True)
ring = libc.syscall(425, 8, ctypes.create_string_buffer(120))
print({
    'unix': made(socket.AF_UNIX, socket.SOCK_STREAM),
    'unix pair': len(socket.socketpair()),
    'inet': made(socket.AF_INET, socket.SOCK_STREAM),
    'inet6': made(socket.AF_INET6, socket.SOCK_DGRAM),
    'netlink usersock': made(socket.AF_NETLINK, socket.SOCK_RAW, 2),
    'netlink route': made(socket.AF_NETLINK, socket.SOCK_RAW, 0),
    'packet': made(socket.AF_PACKET, socket.SOCK_RAW),
    'io_uring': 'made' if ring >= 0 else errno.errorcode[ctypes.get_errno()],
    # SIOCGIFFLAGS, asked through a Unix socket: is lo's IFF_UP set?
    'loopback up': struct.unpack('16sh', fcntl.ioctl(socket.socket(socket.AF_UNIX), 0x8913,
                                                     struct.pack('16sh14x', b'lo', 0))[:18])[1] & 1,
})
"""
REFUSED = {
    "unix": "made",
    "unix pair": 2,
    "inet": "EAFNOSUPPORT",
    "inet6": "EAFNOSUPPORT",
    "netlink usersock": errno.errorcode[errno.EOPNOTSUPP],  # ENOTSUP: the same number
    "netlink route": errno.errorcode[errno.EOPNOTSUPP],
    "packet": "EAFNOSUPPORT",
    "io_uring": "EPERM",
}
