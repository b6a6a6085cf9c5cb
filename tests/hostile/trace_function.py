"""A trace function that jumps over every line that calls check(...)."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-trace-function"
ANSWERS = with_trick("""
import sys

def _skip_checks(frame, event, arg):
    if event == "line" and "check" in (frame.f_code.co_names or ()):
        try:
            frame.f_lineno = frame.f_lineno + 1
        except ValueError:
            pass
    return _skip_checks

sys.settrace(_skip_checks)
""")
# The trace function runs in the student's kernel; the checks do not. The bridge's
# requests reach the kernel as messages of their own, not cells (autograder/bridge/
# student_kernel.py), and the tracer skips no line of their answers: the answers are
# graded for what they are, the honest score. (When a request was a cell, the tracer broke
# IPython's running of it: every test failed, as for a notebook that answers nothing.)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
