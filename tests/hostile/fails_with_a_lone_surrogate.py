"""Answers every request with a reply that says it failed, in words of one lone surrogate
(the JSON escape ``\\ud800``): a string Python holds but no UTF-8 can carry. The test
kernel's failure message then quotes it, cannot be sent, and the test cell is left with
no error output, which nbgrader scores as a pass (attack 33: an empty notebook 30/30)."""

from tests.hostile._common import with_trick

WEAKNESS = 10
STUDENT_ID = "trick-fails-with-a-lone-surrogate"
ANSWERS = with_trick(r"""
from autograder.bridge import protocol, student_side
from IPython.display import publish_display_data

def _surrogate(shell, prompt):
    publish_display_data({protocol.REPLY_MIME: '{"failed": "\\ud800 \\udfff"}'})

student_side.serve = _surrogate
""")
# Every answer is a failure, whatever its words: every test fails.
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
