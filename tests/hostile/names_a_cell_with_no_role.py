"""An added code cell whose nbgrader metadata has a name of its own and no role (grade,
solution and locked all false): nbgrader's autograde drops the unknown name, then fails
looking for it, which made the wrong answers around it the grader's own "error", with no
score, on every run (a fourteenth outside attack's W2). It is graded as the ordinary cell
it is, and the report says so."""

from tests.hostile._common import HONEST_SCORE, with_a_cell_of_no_role

WEAKNESS = 9
STUDENT_ID = "trick-names-a-cell-with-no-role"
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "my_notes graded as ordinary cells"


def transform(nb):
    return with_a_cell_of_no_role("my_notes")
