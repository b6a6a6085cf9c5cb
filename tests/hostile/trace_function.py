"""A trace function that jumps over every line that calls check(...)."""

from tests.hostile._common import with_trick

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
# The trace function runs in the student's kernel; the checks do not.
# The tracer runs in the student's kernel only, where it also breaks the kernel's own
# answers to the test kernel: every test fails, as for a notebook that answers nothing.
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
