"""Leaves the next student's kernel a note in a counter of the namespaces that every kernel
of a template once shared: the next System V IPC id (an eighteenth outside attack's c01:
16 bits a kind). Emptying a namespace leaves its counters; each kernel now has mount,
IPC and network namespaces of its own, with a new /tmp and /dev/shm."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-moves-the-ipc-id-counter-for-the-next"
ANSWERS = with_trick(
    """
import ctypes
libc = ctypes.CDLL(None)
for _ in range(45):
    libc.shmctl(libc.shmget(0, 4096, 0o1600), 0, None)
"""
)
# Its own score is an honest one. What must not happen, the next kernel reading the note,
# tests/autograder/test_student_kernel_template.py checks kernel to kernel.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
