"""nbgrader issue 1324: silence the traceback, so a failing test shows no error."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-showtraceback"
ANSWERS = with_trick("""
from IPython.core.interactiveshell import InteractiveShell
InteractiveShell.showtraceback = lambda self, *args, **kwargs: None
get_ipython().showtraceback = lambda *args, **kwargs: None
get_ipython()._showtraceback = lambda *args, **kwargs: None
""")
# A failing test's traceback is shown by the test kernel, which the student never touches.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
