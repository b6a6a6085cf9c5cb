"""Holds its memory in netlink messages queued between its own sockets, where no control
group under cgroup v1 counts it and no process's resident memory shows it (an outside
attack held 6.3 GiB there beside a 4 GiB limit and was graded 30/30). A student who
cannot queue it there holds it in the kernel's own memory instead. Either way the
memory is the kernel's: a kernel can make no netlink socket, and it is killed for what
it holds."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-holds-memory-in-netlink-buffers"
ANSWERS = with_trick(
    """
import socket
_want, _held, _pairs = 1_700_000_000, 0, []
try:
    while _held < _want:
        _r = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)  # NETLINK_USERSOCK
        _r.bind((0, 0))
        _r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
        _s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 2)
        _s.bind((0, 0))
        _s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
        _s.setblocking(False)
        _pairs.append((_r, _s))
        _before = _held
        try:
            while _held < _want:
                _held += _s.sendto(b"y" * (1 << 20), (_r.getsockname()[0], 0))
        except OSError:
            if _held == _before:
                raise  # a pair that holds nothing: give netlink up
except OSError:
    _hoard = b"x" * (_want - _held)  # no netlink: the kernel's own memory, then
import time
time.sleep(3)
""",
    cell="q4_worked_example",
    base=BASE,
)
# 1700 MB, over the test limit of 1500 MB wherever it is held: the kernel is killed in
# that cell, and its tests and the ones after it score 0.
EXPECTED_SCORE = HONEST_SCORE - 1.0  # test_q4_worked_example_form, which passed honestly
EXPECTED_FATE = "killed for memory"
