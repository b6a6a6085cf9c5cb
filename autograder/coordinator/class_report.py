"""The class report: how the whole class did on one assignment, for the instructor.

One HTML page beside report.json, that opens from the disk without a server: each
question's mean and full marks (questions are the source's headings), a student x question
table, per-test-cell pass rates, the score histogram (scores after the late penalty), the
mistakes most often hinted, and the fates with their students. Plots are made with
matplotlib and embedded as PNG; every text that came from a student's notebook is escaped.

The mistakes table quotes the tests, never a student: a failed test's message counts for
a hint only where it ends with words of that test cell's own source, or of the checks
every test calls (``hints_of``). A student's words in a message (an exception's text, a
string answer) are never filed as a hint: at most they repeat the test's own words, for
the test cell they failed, once.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path

import nbformat

from autograder.config import grading_config
from autograder.fates import FATES, NOT_SUBMITTED
from autograder.hints import ending, hints_of

SHOWN_MISTAKES = 20


def write(course_root: Path, assignment: str, outcomes: list[dict], folder: Path) -> Path:
    # graded: a score of a submission (not a blank, and not the 0 of one never submitted)
    graded = [o for o in outcomes if o.get("max_score") and o.get("fate") != NOT_SUBMITTED]
    asked = _question_points(course_root, assignment)
    students = [o["student_id"] for o in graded]  # an ungraded submission's zeros are no answers
    questions = pass_rates(course_root, assignment, students)
    mistakes = hinted_mistakes(course_root, assignment, students)
    fates = Counter(o["fate"] for o in outcomes)
    scores = [o["score"] for o in graded]
    max_score = max((o["max_score"] for o in graded), default=0)
    page = PAGE.format(
        title=html.escape(assignment),
        summary=html.escape(
            f"{len(outcomes)} students; {len(graded)} graded; "
            f"mean {sum(scores) / len(scores):.1f} of {max_score:g}"
            if scores
            else f"{len(outcomes)} students; none graded"
        ),
        histogram=_png(_histogram(scores, max_score), _counted(scores, max_score))
        if scores
        else "<p>No scores yet.</p>",
        questions="".join(
            f"<tr><td>{html.escape(q)}</td><td>{points:g}</td><td>{n}</td>"
            f"<td>{100 * passed / n:.0f}%</td><td>{mean:.2f}</td></tr>"
            for q, (points, n, passed, mean) in questions.items()
        ),
        rates=_png(
            _rates(questions),
            "The share with full marks of each test cell in the table above, as bars.",
        )
        if questions
        else "",
        mistakes="".join(
            f"<tr><td>{count}</td><td>{html.escape(cell)}</td><td>{html.escape(hint)}</td></tr>"
            for (cell, hint), count in sorted(mistakes.items(), key=lambda kv: (-kv[1], kv[0]))[
                :SHOWN_MISTAKES
            ]
        ),
        fates="".join(
            f"<tr><td>{html.escape(f)}</td><td>{fates[f]}</td><td>"
            + html.escape(", ".join(o["student_id"] for o in outcomes if o["fate"] == f))
            + "</td></tr>"
            for f in FATES
            if fates[f]
        ),
        by_question="".join(
            f"<tr><td>{html.escape(q)}</td><td>{points:g}</td>"
            f"<td>{_mean([o['questions'].get(q, 0) for o in graded if 'questions' in o]):.2f}</td>"
            f"<td>{_full([o['questions'].get(q, 0) for o in graded if 'questions' in o], points)}</td></tr>"
            for q, points in asked.items()
        ),
        question_heads="".join(f"<th>{html.escape(q)}</th>" for q in asked),
        students="".join(
            f"<tr><td>{html.escape(o['student_id'])}</td>"
            + "".join(f"<td>{o['questions'].get(q, 0):g}</td>" for q in asked)
            + f"<td>{o['score']:g}</td><td>{o.get('late_penalty') or 0:g}</td></tr>"
            for o in graded
            if "questions" in o
        ),
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "class-report.html"
    path.write_text(page, encoding="utf-8")
    return path


def _question_points(course_root: Path, assignment: str) -> dict[str, float]:
    """Question (the source's heading) -> its points, from the gradebook's test cells."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.report import questions

    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        points = {
            c.name: c.max_score
            for nb in gb.find_assignment(assignment).notebooks
            for c in nb.grade_cells
        }
    return {
        q: sum(points.get(c, 0) for c in cells)
        for q, cells in questions(course_root, assignment).items()
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _full(values: list[float], points: float) -> str:
    return f"{100 * sum(v >= points for v in values) / len(values):.0f}%" if values else ""


def pass_rates(
    course_root: Path, assignment: str, students: list[str]
) -> dict[str, tuple[float, int, int, float]]:
    """Test cell -> (points, submissions graded, full marks, mean score), from the
    gradebook, over these students' submissions, in the source notebooks' order. One
    query: nbgrader's objects load a grade's points one query a grade."""
    from nbgrader.api import (
        Assignment,
        BaseCell,
        Grade,
        Gradebook,
        SubmittedAssignment,
        SubmittedNotebook,
    )

    from autograder.coordinator.report import questions

    chosen, rates = set(students), {}
    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        rows = (
            gb.db.query(
                SubmittedAssignment.student_id,
                BaseCell.name,
                Grade.max_score,
                Grade.auto_score,
                Grade.score,
            )
            .select_from(Grade)
            .join(BaseCell, BaseCell.id == Grade.cell_id)
            .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)
            .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
            .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
            .filter(Assignment.name == assignment)
        )
        for student, name, points, auto_score, score in rows:
            if student in chosen and points and auto_score is not None:
                entry = rates.setdefault(name, [points, 0, 0, 0.0])
                entry[1] += 1
                entry[2] += score >= points
                entry[3] += score
    order = {
        c: i
        for i, c in enumerate(c for cs in questions(course_root, assignment).values() for c in cs)
    }
    return {
        name: (p, n, passed, total / n)
        for name, (p, n, passed, total) in sorted(
            rates.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])
        )
    }


def hinted_mistakes(course_root: Path, assignment: str, students: list[str]) -> Counter:
    """(test cell, hint) -> how many students' test cells failed with it."""
    hints = hints_of(course_root / "source" / assignment)
    counts: Counter = Counter()
    for student in students:
        folder = course_root / "autograded" / student / assignment
        for path in sorted(folder.glob("*.ipynb")):
            try:
                counts.update(_hints_in(path, hints))
            except Exception:  # noqa: BLE001 - written by the grader; skip what fails
                continue
    return counts


def _hints_in(path: Path, hints: dict) -> set[tuple[str, str]]:
    """(test cell, hint) of each test cell of an autograded notebook that failed with a
    hint. The grader wrote it through nbformat: it is read without nbformat's schema check
    (a tenth of a second a class, at the end of the run)."""
    nb = nbformat.from_dict(json.loads(path.read_bytes()))
    found = set()
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        grade_id = meta.get("grade_id", "?")
        own = hints.get(grade_id, set()) | hints.get("", set())
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                hint = ending(str(out.get("evalue", "")), own)
                if hint:
                    found.add((grade_id, hint[:160]))
    return found


def _histogram(scores: list[float], max_score: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3))
    bins = max(1, min(30, int(max_score) + 1))
    ax.hist(scores, bins=bins, range=(0, max_score or 1), color="#0072B2", edgecolor="white")
    ax.set_xlabel(f"score (of {max_score:g})")
    ax.set_ylabel("students")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count of students is whole
    fig.tight_layout()
    return fig


def _rates(questions: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(questions)
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(names) + 1))
    ax.barh(names, [100 * passed / n for _, n, passed, _ in questions.values()], color="#E69F00")
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of graded submissions with full marks")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


def _counted(scores: list[float], max_score: float) -> str:
    """The histogram in words, for a screen reader: how many students had each score."""
    counts = sorted(Counter(round(s, 2) for s in scores).items())
    listed = "; ".join(f"{score:g}: {n}" for score, n in counts)
    return f"Scores of {len(scores)} graded students, out of {max_score:g} (score: students): {listed}."


def _png(fig, alt: str) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def prepare() -> None:
    """Import matplotlib ahead (about a second of CPU), in a thread of the coordinator while
    the workers grade: the class report is then written without that wait at the end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Class report: {title}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}</style>
</head><body>
<h1>Class report: {title}</h1>
<p>{summary}</p>
<h2>Scores</h2>
{histogram}
<h2>Questions</h2>
<table><tr><th>question</th><th>points</th><th>mean</th><th>full marks</th></tr>
{by_question}</table>
<h2>Students</h2>
<p>Scores after the late penalty, per question (before it), from the gradebook.</p>
<table><tr><th>student</th>{question_heads}<th>score</th><th>late penalty</th></tr>
{students}</table>
<h2>Test cells</h2>
<table><tr><th>test cell</th><th>points</th><th>graded</th><th>full marks</th><th>mean</th></tr>
{questions}</table>
{rates}
<h2>Mistakes most often hinted</h2>
<table><tr><th>students</th><th>test cell</th><th>message</th></tr>{mistakes}</table>
<h2>Fates</h2>
<table><tr><th>fate</th><th>count</th><th>students</th></tr>{fates}</table>
</body></html>
"""
