"""In a folder import, a second entry for the same student (a notebook beside a folder of
that name), and a notebook whose name only extends another's."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import SOLUTIONS, TOTAL

WEAKNESS = 6
STUDENT_ID = "trick-collides"
VICTIM = "folder-victim"


def place(inbox):
    inbox.folder(f"{VICTIM}.ipynb", inbox.notebook(SOLUTIONS))
    inbox.folder(f"{VICTIM}.z.ipynb", inbox.notebook({}))  # another id: folder-victim.z
    inbox.folder(f"{STUDENT_ID}.ipynb", inbox.notebook(SOLUTIONS))
    inbox.folder(STUDENT_ID, files={"gpu_tensors.ipynb": inbox.notebook(BASE)})


# The victim keeps their grade; the two entries for one id are left for the instructor.
EXPECTED = {
    VICTIM: (TOTAL, "graded"),
    f"{VICTIM}.z": (0.0, "graded"),
    STUDENT_ID: (None, "needs review"),  # left for the instructor: no grade, blank
}
del HONEST_SCORE
