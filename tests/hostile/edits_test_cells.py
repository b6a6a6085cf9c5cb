"""Edits the notebook's JSON: empties one failing test, deletes another, relabels a third."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import make_submission, with_cell_source, without_cell

WEAKNESS = 2
STUDENT_ID = "trick-edits-test-cells"

# nbgrader puts every test cell back from the gradebook; the test kernel runs the
# source's own test cells anyway.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"


def transform(nb):
    nb = make_submission(answers=BASE)
    nb = with_cell_source(nb, "test_q4_gpu_route", "pass")
    nb = without_cell(nb, "test_q4_copy_ms")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "test_q4_worked_example_form":
            meta["points"] = 20
    return nb
