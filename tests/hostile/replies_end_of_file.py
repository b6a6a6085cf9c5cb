"""Answers every request with the one character that ipykernel's ``raw_input`` takes for
the end of input (``"\\x04"``): reading the answer raised EOFError in the test kernel,
which the grader took for its own failure and withheld the points for review instead of
failing the tests (attack 33)."""

from tests.hostile._common import with_trick

WEAKNESS = 4
STUDENT_ID = "trick-replies-end-of-file"
ANSWERS = with_trick(r"""
from autograder.bridge import protocol, student_side
from IPython.display import publish_display_data

def _eof(shell, prompt):
    publish_display_data({protocol.REPLY_MIME: "\x04"})

student_side.serve = _eof
""")
# No answer at all: every test fails, and the submission is graded.
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
