"""An LMS upload whose own file name repeats the LMS's pattern with another student's id,
so that a greedy pattern files it as that student's (impersonation)."""

from tests.hostile._common import BASE
from tests.submissions_gpu_tensors import MISTAKES, SOLUTIONS, TOTAL

WEAKNESS = 6
STUDENT_ID = "trick-lms-impersonation"
VICTIM = "lms-victim"


def place(inbox):
    inbox.zip(
        f"gpu_tensors_{VICTIM}_attempt_2024-03-01-09-00-00_gpu_tensors.ipynb",
        inbox.notebook(SOLUTIONS),
    )
    # The LMS wrote "gpu_tensors_<id>_attempt_<date>_"; the rest is the upload's name.
    inbox.zip(
        f"gpu_tensors_{STUDENT_ID}_attempt_2024-03-01-10-00-00_"
        f"x_{VICTIM}_attempt_2024-03-02-10-00-00_gpu_tensors.ipynb",
        inbox.notebook({}),
    )


# The victim keeps their own work; the impersonator's upload is filed as their own, under
# a name that is not the assignment's notebook.
EXPECTED = {VICTIM: (TOTAL, "graded"), STUDENT_ID: (None, "no notebook")}
del BASE, MISTAKES
