"""An added cell with no role whose nbgrader name ends in a newline: "$" in a pattern
matches before a final newline, so the name passed as a plain one and was quoted in the
reports' details, a line of its own that looked like the staff's (a seventeenth outside
attack's h01). Names are checked whole: this one is not plain, the notebook is refused
as any notebook with a forged cell name, and the name is never quoted."""

from tests.hostile._common import with_a_cell_of_no_role

WEAKNESS = 9
STUDENT_ID = "trick-names-a-cell-with-a-newline"
EXPECTED_SCORE = None  # no grade: blank in every export, never 0
EXPECTED_FATE = "invalid notebook"
EXPECTED_DETAIL = "has an nbgrader cell name that is not a plain name"


def transform(nb):
    return with_a_cell_of_no_role("COURSE-STAFF_plagiarism_flag_score_provisional\n")
