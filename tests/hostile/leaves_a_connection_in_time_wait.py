"""Leaves closed TCP connections behind in the template's network namespace, which every
kernel forked from it shared: a connection closed by its client waits a minute in
TIME_WAIT, and its addresses and ports, chosen by the kernel, carried 3 bytes each to the
next student's kernel, which read them in /proc/net/tcp (a seventeenth outside attack's
p02). Each kernel now has a network namespace of its own with its loopback down: no
connection can be made, and the answers around it score as they would without it."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-leaves-a-connection-in-time-wait"
ANSWERS = with_trick(
    """
import socket
try:
    server = socket.create_server(("127.0.0.1", 0))
    for i in range(8):
        client = socket.create_connection(server.getsockname(), timeout=2)
        accepted, _ = server.accept()
        client.close()  # the client closes first: its side waits in TIME_WAIT
        accepted.close()
    server.close()
except OSError:
    pass  # no loopback in the kernel's network namespace
"""
)
# Its own score is an honest one. What must not happen, the next student seeing the
# connections, tests/autograder/test_student_kernel_template.py checks kernel to kernel.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
