"""A file whose name is not UTF-8 (``notes\\xff.txt``, which Python reads as
``notes\\udcff.txt``) beside the notebook: in a folder import, and in a submission in
the nbgrader exchange. Hashing its name raised and course-grade stopped before it graded
anyone in the class (attack 35): the other students here must be graded as ever."""

from tests.submissions_gpu_tensors import SOLUTIONS, TOTAL

WEAKNESS = 6
STUDENT_ID = "trick-odd-file-name"
ODD = {"notes\udcff.txt": b"my notes\n"}


def place(inbox):
    nb = inbox.notebook(SOLUTIONS)
    inbox.folder(f"{STUDENT_ID}-folder", files={"gpu_tensors.ipynb": nb, **ODD})
    inbox.exchange(
        f"{STUDENT_ID}-exchange+gpu_tensors+2024-03-01 10:00:00.000000 UTC+odd",
        {"gpu_tensors.ipynb": nb, **ODD},
    )


# A right answer keeps its points: the odd file is only beside it.
EXPECTED = {
    f"{STUDENT_ID}-folder": (TOTAL, "graded"),
    f"{STUDENT_ID}-exchange": (TOTAL, "graded"),
}
