"""Adds a code cell whose metadata names the lexer its feedback page is highlighted with
(``magics_language``): pygments' systemd lexer takes time that grows with the cube of a
run of spaces. An outside attack's 4,000 spaces held the grading worker 183 s on its
feedback page, outside every kernel's limits, with every classmate after it waiting; at
8,000 it would be about 25 minutes. Every code cell is highlighted as the course's
Python now, within a page's budget; in the kernel the cell is an IndentationError, which
costs nothing."""

import nbformat

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 5
STUDENT_ID = "trick-highlights-with-a-lexer-of-its-choosing"
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"


def transform(nb):
    nb = make_submission(answers=BASE)
    cell = nbformat.v4.new_code_cell(" " * 8000 + "x")
    cell.metadata["magics_language"] = "systemd"
    nb.cells.append(cell)
    return nb
