"""Patch the comparisons the checks use and shadow isinstance, so wrong numbers pass."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 3
STUDENT_ID = "trick-patches-comparisons"
ANSWERS = with_trick("""
import math, torch
math.isclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
isinstance = lambda obj, cls: True  # the checks look names up in the notebook's namespace
""")
# The patches live in the student's kernel; the checks run in the test kernel with its
# own math, torch and isinstance.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
