"""Holds its memory in perf ring buffers: it opens perf events on itself and has a
short-lived child map each buffer first, so that only the child's locked-memory limit
pays, then maps the same buffer itself at no charge. No control group counts those
pages, nor a process's resident memory (an outside attack held 6.0-6.5 GB beside a
4 GiB limit, graded 30/30). A student who cannot hold it there holds it in the kernel's
own memory instead. Either way the memory is the kernel's: a kernel can open no perf
event, and it is killed for what it holds."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-holds-memory-in-perf-ring-buffers"
ANSWERS = with_trick(
    """
import ctypes, mmap, os, struct
_want, _held, _maps = 1_700_000_000, 0, []
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
def _event():
    attr = bytearray(128)  # a software cpu-clock event on itself, disabled, user space only
    struct.pack_into("IIQ", attr, 0, 1, 128, 0)
    struct.pack_into("Q", attr, 40, 1 | 32 | 64)
    fd = _libc.syscall(298, (ctypes.c_char * 128).from_buffer(attr), 0, -1, -1, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "perf_event_open")
    return fd
_size = 1025 * 4096  # one page of header and 1024 of data
try:
    while _held < _want:
        _fd = _event()
        _mapped, _go = os.pipe(), os.pipe()
        _child = os.fork()
        if _child == 0:  # the child maps it first: its limit pays
            try:
                _m = mmap.mmap(_fd, _size)
                os.write(_mapped[1], b"1")
                os.read(_go[0], 1)
            finally:
                os._exit(0)
        if os.read(_mapped[0], 1) != b"1":
            raise OSError("the child could not map it")
        _maps.append(mmap.mmap(_fd, _size))
        os.write(_go[1], b"1")
        os.waitpid(_child, 0)
        for _f in (_fd, *_mapped, *_go):
            os.close(_f)
        _held += _size
except OSError:
    _hoard = b"x" * (_want - _held)  # no perf events: the kernel's own memory, then
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
