"""Nests a list 300 deep in an answer cell's metadata (an outside attack: at about 490
deep nbgrader's own steps in the worker hit Python's recursion limit, and the submission
came back as the grader's own error, "graded again next run", on every run). A notebook
that nests deeper than ``inbox.MAX_DEPTH`` is refused before anything reads it:
``invalid notebook``, saying how deep the grader reads."""

from tests.hostile._common import BASE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 5
STUDENT_ID = "trick-nests-metadata-past-the-graders-stack"
EXPECTED_SCORE = None  # no grade: blank in every export, never 0
EXPECTED_FATE = "invalid notebook"
EXPECTED_DETAIL = "nests more than 100 levels deep"


def transform(nb):
    nb = make_submission(answers=BASE)
    nested: list = [1]
    for _ in range(300):
        nested = [nested]
    nb.cells[0].metadata["deep"] = nested
    return nb
