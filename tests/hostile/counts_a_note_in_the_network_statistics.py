"""Leaves the next student's kernel a note in a counter of the namespaces that every kernel
of a template once shared: the network's statistics, datagrams sent to a closed port (an
eighteenth outside attack's c03: many bytes). Emptying a namespace leaves its counters;
each kernel now has mount, IPC and network namespaces of its own, with a new /tmp and
/dev/shm."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-counts-a-note-in-the-network-statistics"
ANSWERS = with_trick(
    """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(45):
    s.sendto(b"note", ("127.0.0.1", 9))
"""
)
# Its own score is an honest one. What must not happen, the next kernel reading the note,
# tests/autograder/test_student_kernel_template.py checks kernel to kernel.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
