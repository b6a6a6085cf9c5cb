"""The page a student gets when their full feedback page could not be built within its
limits (``autograder.worker.limited_child``): their scores, cell by cell, and why.

Everything on it comes from the worker's private gradebook (the names of the graded
cells are the instructor's, restored by nbgrader) and the worker's own words; nothing is
read from the notebook. Every text is escaped, and the page has no script, no style and
no link, so it needs no sanitizing.
"""

from __future__ import annotations

from html import escape

PAGE = """<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>{title}</title></head>
<body>
<h1>{title}</h1>
<p>Student: {student}. Score: <strong>{score:g} / {max_score:g}</strong>.</p>
<p><em>The full feedback page, with your notebook's cells and outputs, could not be made:
{why}. This page gives your scores only; your notebook was graded as usual. Open your
notebook to see its cells.</em></p>
<table border="1" cellpadding="4">
<tr><th>Graded cell</th><th>Points</th><th>Out of</th></tr>
{rows}
</table>
</body>
</html>
"""


def page(db_url: str, assignment: str, student: str, notebook: str, why: str) -> str:
    """The plain page of ``notebook`` (its name without ``.ipynb``)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        graded = gb.find_submission_notebook(notebook, assignment, student)
        grades = sorted(graded.grades, key=lambda g: g.name)
        rows = "\n".join(
            f"<tr><td>{escape(g.name)}</td><td>{float(g.score):g}</td>"
            f"<td>{float(g.max_score):g}</td></tr>"
            for g in grades
        )
        return PAGE.format(
            title=escape(f"Feedback: {assignment}, {notebook}"),
            student=escape(student),
            score=float(graded.score),
            max_score=float(graded.max_score),
            why=escape(why),
            rows=rows,
        )
