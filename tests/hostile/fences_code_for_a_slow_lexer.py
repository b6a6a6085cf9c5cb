"""Adds a markdown cell with a fenced code block that names pygments' systemd lexer, whose
time grows with the cube of a run of spaces: nbconvert highlights a fence with the lexer
it names, on the grading worker, outside every kernel's limits (8,000 spaces: about 25
minutes, with every classmate after it waiting). Only fences in the course's language
are highlighted now, within a page's budget; any other is shown as plain code."""

import nbformat

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 5
STUDENT_ID = "trick-fences-code-for-a-slow-lexer"
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"


def transform(nb):
    nb = make_submission(answers=BASE)
    nb.cells.append(nbformat.v4.new_markdown_cell("```systemd\n" + " " * 8000 + "x\n```\n"))
    return nb
