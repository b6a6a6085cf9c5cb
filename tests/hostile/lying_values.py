"""Answers that lie when compared: an int whose == is always True, a str-like that equals anything."""

from tests.hostile._common import SOLUTIONS, with_trick
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 3
STUDENT_ID = "trick-lying-values"
ANSWERS = with_trick("""
class _Equal(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

class _Anything:
    def __eq__(self, other):
        return True
    def __hash__(self):
        return hash("GPU")
""")
ANSWERS["q3_ticks"] = (
    "cpu_ticks_3 = _Equal(1)\ngpu_ticks_3 = _Equal(1)\nwinner_3 = _Anything()\n"
    "cpu_ticks_2 = _Equal(1)\ngpu_ticks_2 = _Equal(1)"
)
ANSWERS["q4_worked_example"] = SOLUTIONS["q4_worked_example"]
# The test kernel gets the ints as the 1s they really are, and winner_3, which has no
# plain form, as an answer that equals nothing: both tests of q3_ticks fail, as they
# would for an honest wrong answer.
EXPECTED_SCORE = sum(POINTS.values()) - POINTS["test_q3_ticks_form"] - POINTS["test_q3_ticks"]
EXPECTED_FATE = "graded"
