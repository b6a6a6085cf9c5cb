"""Rebind builtins and patch the comparisons the checks use, so wrong numbers compare equal."""
from tests.hostile._common import HONEST_SCORE, with_trick

STUDENT_ID = "trick-patches-comparisons"
ANSWERS = with_trick('''
import builtins, math, torch
math.isclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
builtins.isinstance = lambda obj, cls: True
''')
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "patches math.isclose"
