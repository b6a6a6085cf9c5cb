"""A function that raises with a lone surrogate in its message: the test kernel's own
failure message quotes it and cannot be sent, so the test cell would have no error
output, which nbgrader scores as a pass (attack 33)."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 10
STUDENT_ID = "trick-raises-a-lone-surrogate"
ANSWERS = {
    **BASE,
    "q3_race_ticks": """
def race_ticks(steps, numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):
    raise ValueError("nope " + chr(0xD800))
""",
}
EXPECTED_SCORE = HONEST_SCORE - POINTS["test_q3_race_ticks_form"] - POINTS["test_q3_race_ticks"]
EXPECTED_FATE = "graded"
