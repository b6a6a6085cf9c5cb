"""Adds 3,000 empty raw cells (an outside attack added 107,000, 4.99 MB, under the file
size limit: nbgrader's own steps, in the grading worker outside every limit of the
kernels', took 22 s on them, the coordinator's check as long again, on every run, and the
worker held 645 MB: attack 30). A notebook of more than ``inbox.MAX_CELLS`` cells is
refused before anything reads it cell by cell: ``invalid notebook``, saying how many."""

import nbformat

from tests.hostile._common import BASE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 5
STUDENT_ID = "trick-floods-the-notebook-with-empty-cells"
EXPECTED_SCORE = None  # no grade: blank in every export, never 0
EXPECTED_FATE = "invalid notebook"
EXPECTED_DETAIL = "the grader reads at most 2,000"


def transform(nb):
    nb = make_submission(answers=BASE)
    nb.cells.extend(nbformat.v4.new_raw_cell("") for _ in range(3_000))
    return nb
