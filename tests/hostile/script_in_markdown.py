"""Markdown cells that carry a script, an event handler and a javascript: link into the
instructor's feedback page."""

import nbformat

from tests.hostile._common import BASE, HONEST_SCORE
from tests.submissions_gpu_tensors import make_submission

WEAKNESS = 7
STUDENT_ID = "trick-script-in-markdown"
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"


def transform(nb):
    nb = make_submission(answers=BASE)
    nb.cells.insert(
        1,
        nbformat.v4.new_markdown_cell(
            "Hi <script>fetch('/api/contents?cgxss=1')</script>"
            '<img src=x onerror="cgxss()"> [click](javascript:cgxss())'
            '<a href="javascript:cgxss()">me</a><iframe src="javascript:cgxss()"></iframe>'
        ),
    )
    return nb
