"""Moves the pid counter of the template's pid namespace, which every kernel forked from
it shares one after another, to leave the next student's kernel a number in its own pid
(about 20 bits a submission: a seventeenth outside attack's p03). Before each fork the
template's pid keeper sets the counter: every kernel gets the same pid."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-moves-the-pid-counter-for-the-next"
ANSWERS = with_trick(
    """
import os
note = 0b101101  # a few forks are enough to move the counter
for _ in range(note):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""
)
# Its own score is an honest one. What must not happen, the next kernel's pid carrying the
# note, tests/autograder/test_student_kernel_template.py checks kernel to kernel.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
