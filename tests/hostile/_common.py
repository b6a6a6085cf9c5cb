"""Shared by the trick submissions in this folder (files starting with _ are not cases).

Every trick sits in the first answer cell, after a correct prepare_batch, so it runs
before every test. The rest of the notebook is the "seconds" mistake (the worked example
in seconds, which fails test_q4_copy_ms and test_q4_gpu_route): an honest student with
these answers scores HONEST_SCORE, and a trick that gains nothing scores at most that.
"""
from tests.submissions import MISTAKES, SOLUTIONS

BASE = MISTAKES["seconds"].answers
HONEST_SCORE = MISTAKES["seconds"].score


def with_trick(trick: str, cell: str = "q1_prepare_batch", base=None) -> dict:
    answers = dict(base or BASE)
    answers[cell] = SOLUTIONS[cell] + "\n\n" + trick.strip() + "\n"
    return answers
