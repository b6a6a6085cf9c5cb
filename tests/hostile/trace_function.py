"""A trace function that jumps over every line that calls check(...)."""
from tests.hostile._common import HONEST_SCORE, with_trick

STUDENT_ID = "trick-trace-function"
ANSWERS = with_trick('''
import sys

def _skip_checks(frame, event, arg):
    if event == "line" and "check" in (frame.f_code.co_names or ()):
        try:
            frame.f_lineno = frame.f_lineno + 1
        except ValueError:
            pass
    return _skip_checks

sys.settrace(_skip_checks)
''')
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "trace function"
