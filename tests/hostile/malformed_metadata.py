"""nbgrader metadata that is not what nbgrader expects: a string where a mapping should
be, and points given as text."""

from tests.hostile._common import BASE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 9
STUDENT_ID = "trick-malformed-metadata"
EXPECTED_SCORE = None  # no grade: blank in every export, never 0
EXPECTED_FATE = "invalid notebook"
EXPECTED_DETAIL = "not a mapping"


def transform(nb):
    nb = make_submission(answers=BASE)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "test_q4_copy_ms":
            meta["points"] = "all of them"
        if meta.get("grade_id") == "q2_mb":
            cell.metadata["nbgrader"] = "grade: true"
    return nb
