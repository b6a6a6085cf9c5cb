"""Floods output through the paths a cap on streams misses: display updates, and errors."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-display-update-flood"
ANSWERS = with_trick("""
from IPython.display import display, HTML, update_display
display(HTML("start"), display_id="flood")
for i in range(300):
    update_display(HTML("<p>" + "y" * 200_000 + "</p>"), display_id="flood")
""")
ANSWERS["q3_ticks"] = (
    ANSWERS["q3_ticks"]
    + """
try:
    raise ValueError("z" * 20_000_000)
except ValueError:
    pass
get_ipython().showtraceback  # still there
_big = "e" * 5_000_000
"""
)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "output over 1 MB dropped"
