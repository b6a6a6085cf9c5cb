"""Zip entries whose names climb out of the extraction folder or are absolute paths."""

from tests.submissions_gpu_tensors import SOLUTIONS, TOTAL

WEAKNESS = 6
STUDENT_ID = "trick-zip-path-escape"


def place(inbox):
    bad = inbox.notebook(SOLUTIONS)
    inbox.zip("../../../gpu_tensors_escaper_attempt_2024-03-01_gpu_tensors.ipynb", bad)
    inbox.zip("/etc/gpu_tensors_escaper_attempt_2024-03-01_gpu_tensors.ipynb", bad)
    inbox.zip("sub/../../gpu_tensors_escaper_attempt_2024-03-01_cron.ipynb", bad)
    inbox.zip(f"gpu_tensors_{STUDENT_ID}_attempt_2024-03-01_gpu_tensors.ipynb", bad)


# The escaping entries are refused one by one, as problems of the download, never of the
# student their names give (a name with a folder part is not one the LMS wrote, and may
# name someone else); the import goes on with the rest.
EXPECTED = {STUDENT_ID: (TOTAL, "graded")}
