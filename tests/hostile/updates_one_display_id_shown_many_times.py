"""Shows 300 outputs under one display id, then updates that id 1,000 times: nbclient
rewrites every output shown under the id for each update, 300,000 rewrites in the
grader's own process for 1,300 small messages (outside attack 36: 2,000 shown and 48,000
updates took a grading worker 30 CPU s, beside 10 of the kernel's). Each rewritten output
costs the update's bytes against the output budget (attack 39), which 1 MB reaches long
before ``outputs.MAX_REWRITES`` rewrites (the cap that holds where a course allows much
more output): such messages are dropped with the budget's note."""

from tests.hostile._common import HONEST_SCORE, WAIT_WHEN_FULL, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-updates-one-display-id-shown-many-times"
ANSWERS = with_trick(
    WAIT_WHEN_FULL
    + """
from IPython.display import display, update_display
for _i in range(300):
    display({"text/plain": "x"}, raw=True, display_id="d")
for _i in range(1_000):
    update_display({"text/plain": "y"}, raw=True, display_id="d")
del _i
"""
)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "output over 1 MB dropped"
