"""Adds a cell that claims to be a 100-point test of the assignment."""

import nbformat

from tests.hostile._common import BASE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 9
STUDENT_ID = "trick-forged-test-cell"
EXPECTED_SCORE = None  # no grade: blank in every export, never 0
EXPECTED_FATE = "invalid notebook"
EXPECTED_DETAIL = "claims to be the assignment's cell 'bonus'"


def transform(nb):
    nb = make_submission(answers=BASE)
    cell = nbformat.v4.new_code_cell("pass  # free points")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "bonus",
        "locked": True,
        "points": 100,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    nb.cells.append(cell)
    return nb
