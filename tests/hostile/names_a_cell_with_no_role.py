"""An added code cell whose nbgrader metadata has a name of its own and no role (grade,
solution and locked all false): nbgrader's autograde drops the unknown name, then fails
looking for it, which made the wrong answers around it the grader's own "error", with no
score, on every run (a fourteenth outside attack's W2). It is graded as the ordinary cell
it is, and the report says so."""

import nbformat

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 9
STUDENT_ID = "trick-names-a-cell-with-no-role"
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "my_notes graded as ordinary cells"


def transform(nb):
    nb = make_submission(answers=BASE)
    cell = nbformat.v4.new_code_cell("notes = 'my own working'")
    cell.metadata["nbgrader"] = {
        "grade_id": "my_notes",
        "grade": False,
        "solution": False,
        "locked": False,
        "schema_version": 3,
    }
    nb.cells.append(cell)
    return nb
