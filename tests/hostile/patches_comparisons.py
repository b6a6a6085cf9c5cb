"""Patch the comparisons the checks use and shadow isinstance, so wrong numbers pass."""
from tests.hostile._common import HONEST_SCORE, with_trick

STUDENT_ID = "trick-patches-comparisons"
ANSWERS = with_trick('''
import math, torch
math.isclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
isinstance = lambda obj, cls: True  # the checks look names up in the notebook's namespace
''')
# The shadowed isinstance breaks checks in the student's own kernel (it scores 16 there),
# and the clean room never gives more than that kernel: 16 < HONEST_SCORE.
EXPECTED_SCORE = HONEST_SCORE - 10
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "patches math.isclose"
