"""A page of its own beside the notebook, named like nbgrader's feedback page's neighbours:
nbgrader copies a submission's other files into autograded/ and feedback/, where an
instructor who opens it from the Jupyter server would run its script with the server's
origin."""

from tests.hostile._common import BASE, HONEST_SCORE

WEAKNESS = 7
STUDENT_ID = "trick-html-beside"
PAGE = b"<script>fetch('/api/contents?cgxss=1')</script>"


def place(inbox):
    inbox.folder(
        STUDENT_ID,
        files={
            "gpu_tensors.ipynb": inbox.notebook(BASE),
            "evil.html": PAGE,
            "gpu_tensors.html": PAGE,
        },
    )


# Graded like the honest notebook; what reaches feedback/ and autograded/ is only the
# notebook and its own feedback page (asserted for the whole class).
EXPECTED = {STUDENT_ID: (HONEST_SCORE, "graded")}
