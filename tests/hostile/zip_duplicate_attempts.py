"""Two attempts at the same time in one download, and an older, better-looking one: a
duplicate that aborted the whole import before."""

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import SOLUTIONS

WEAKNESS = 6
STUDENT_ID = "trick-zip-duplicates"
TWICE = "trick-zip-same-date"


def place(inbox):
    inbox.zip(
        f"gpu_tensors_{STUDENT_ID}_attempt_2024-03-01-09-00-00_gpu_tensors.ipynb",
        inbox.notebook(SOLUTIONS),
    )
    inbox.zip(
        f"gpu_tensors_{STUDENT_ID}_attempt_2024-03-02-09-00-00_gpu_tensors.ipynb",
        inbox.notebook(BASE),
    )
    inbox.zip(
        f"gpu_tensors_{TWICE}_attempt_2024-03-01-09-00-00_gpu_tensors.ipynb",
        inbox.notebook(SOLUTIONS),
    )
    inbox.zip(  # the LMS's name for a second upload of the same file, at the same time
        f"gpu_tensors_{TWICE}_attempt_2024-03-01-09-00-00_gpu_tensors-1.ipynb",
        inbox.notebook(BASE),
    )


# The latest attempt counts; two at the same time are left for the instructor to settle.
EXPECTED = {STUDENT_ID: (HONEST_SCORE, "graded"), TWICE: (None, "needs review")}  # no grade: blank
