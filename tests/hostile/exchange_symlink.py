"""An nbgrader exchange submission holding links to the grading machine's files (the
course's source notebook, a file outside the course), hoping collect copies them in."""

from tests.submissions_gpu_tensors import SOLUTIONS

WEAKNESS = 6
STUDENT_ID = "trick-exchange-symlink"


def place(inbox):
    inbox.exchange(
        f"{STUDENT_ID}+gpu_tensors+2024-03-01 10:00:00.000000 UTC+abe",
        {"gpu_tensors.ipynb": inbox.notebook(SOLUTIONS)},
        links={
            "solutions.ipynb": str(inbox.course / "source" / "gpu_tensors" / "gpu_tensors.ipynb"),
            "secret.txt": str(inbox.sentinel),
        },
    )


# Nothing is copied through a link; a submission that holds one is not graded.
EXPECTED = {STUDENT_ID: (None, "invalid notebook")}  # no grade: blank, never 0
