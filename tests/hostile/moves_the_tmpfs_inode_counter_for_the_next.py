"""Leaves the next student's kernel a note in a counter of the namespaces that every kernel
of a template once shared: the next inode number of /tmp and /dev/shm (an eighteenth
outside attack's c02: 20 bits a folder). Emptying a namespace leaves its counters; each
kernel now has mount, IPC and network namespaces of its own, with a new /tmp and
/dev/shm."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-moves-the-tmpfs-inode-counter-for-the-next"
ANSWERS = with_trick(
    """
import os
for folder in ("/tmp", "/dev/shm"):
    for i in range(45):
        open(f"{folder}/n{i}", "w").close()
        os.remove(f"{folder}/n{i}")
"""
)
# Its own score is an honest one. What must not happen, the next kernel reading the note,
# tests/autograder/test_student_kernel_template.py checks kernel to kernel.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
