"""Student ids that are paths: '..' in the nbgrader exchange and in the LMS download."""

from tests.submissions_gpu_tensors import SOLUTIONS

WEAKNESS = 6
STUDENT_ID = ".."


def place(inbox):
    nb = inbox.notebook(SOLUTIONS)
    inbox.exchange("..+gpu_tensors+2024-03-01 10:00:00.000000 UTC+abc", {"gpu_tensors.ipynb": nb})
    inbox.exchange(".+gpu_tensors+2024-03-01 10:00:00.000000 UTC+abd", {"gpu_tensors.ipynb": nb})
    inbox.zip("gpu_tensors_.._attempt_2024-03-01_gpu_tensors.ipynb", nb)
    inbox.folder("...ipynb", nb)


# Refused as ids: nothing is written outside submitted/ (asserted for the whole class)
# and nobody is graded under such a name.
EXPECTED = {}
