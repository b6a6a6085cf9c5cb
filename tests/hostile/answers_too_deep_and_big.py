"""Answers built to break the review: values nested far past any limit, a cell whose
expression is nested deep enough to break a parser, and a function result of 60 MB."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 4
STUDENT_ID = "trick-answers-too-deep-and-big"
ANSWERS = {
    **BASE,
    "q1_second_problem": "second_problem = " + "(" * 90 + '"B"' + ")" * 90 + "\n"
    "_deep = []\nfor _ in range(5000):\n    _deep = [_deep]\n"
    "second_problem = _deep",
    "q2_size_mb": "def size_mb(shape, dtype):\n    return 'x' * 60_000_000",
}
# second_problem cannot be read (too deep): its test fails; size_mb's result is over the
# message limit and is dropped: its tests fail. Nothing fails open, and the test kernel is
# unharmed.
EXPECTED_SCORE = (
    HONEST_SCORE
    - POINTS["test_q1_second_problem"]
    - POINTS["test_q2_size_mb_form"]
    - POINTS["test_q2_size_mb"]
)
EXPECTED_FATE = "graded"
