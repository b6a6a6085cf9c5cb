"""A function that raises with everything its caller holds in the message, so the test's
failure message would carry the hidden test's code and values into the feedback."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 8
STUDENT_ID = "trick-raises-with-test-code"
ANSWERS = {
    **BASE,
    "q3_race_ticks": """
import inspect, sys

def race_ticks(steps, numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):
    frames = inspect.stack()
    raise ValueError(" | ".join(repr(f.frame.f_locals) + "".join(f.code_context or [])
                                for f in frames))
""",
}
EXPECTED_SCORE = HONEST_SCORE - POINTS["test_q3_race_ticks_form"] - POINTS["test_q3_race_ticks"]
EXPECTED_FATE = "graded"
