"""A function that ends its own kernel when a hidden test calls it, hoping the tests that
were left are scored as passed (a test cell with no output scores full marks)."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 4
STUDENT_ID = "trick-kills-kernel-in-a-test"
ANSWERS = {
    **BASE,
    "q3_race_ticks": """
import os

def race_ticks(steps, numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):
    if copy_ticks != 40:  # only the hidden test varies the copy time
        os._exit(0)
    return steps * math.ceil(numbers / cpu_per_tick), 2 * copy_ticks + steps
""",
}
# The calling test fails, every later cell is "not graded: kernel stopped": points are
# withheld, never given.
_LATER = [
    "test_q3_race_ticks",
    "test_q3_fewest_form",
    "test_q3_fewest",
    "test_q4_dtypes",
    "test_q4_worked_example_form",
]
EXPECTED_SCORE = HONEST_SCORE - sum(POINTS[t] for t in _LATER)
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "kernel stopped"
