"""What the instructor reads at the end: grades.csv (and an LMS's import format), the
report of fates, a summary table, and the class report (``autograder.coordinator.class_report``).

Every score in them is the gradebook's, read when they are written: after nbgrader's late
penalty (``LateSubmissionPlugin``), with the penalty beside it, and with any manual grade
from formgrader. The ledger only says what became of each submission (its fate)."""

from __future__ import annotations

import csv
import json
import os
import re
from collections import Counter
from pathlib import Path

from traitlets import Dict, Unicode
from traitlets.config import Configurable

from autograder import fates
from autograder.config import grading_config
from autograder.fates import FATES
from autograder.printable import printable

REPORT_FIELDS = (
    "student_id",
    "fate",
    "score",
    "max_score",
    "raw_score",
    "late_penalty",
    "details",
    "this_run",
    "seconds",
)


def questions(course_root: Path, assignment: str) -> dict[str, list[str]]:
    """Question -> its test cells, in order: the cells under each of the source notebook's
    headings ("## Question 1: ..." gives "Question 1"), the headings above them."""
    import nbformat

    from autograder.coordinator.inbox import expected_notebooks

    out: dict[str, list[str]] = {}
    for name in expected_notebooks(course_root, assignment):
        nb = nbformat.read(Path(course_root) / "source" / assignment / name, as_version=4)
        heading = name[: -len(".ipynb")]
        for cell in nb.cells:
            found = (
                re.match(r"^(#{1,2})\s+(.+)", cell.source.lstrip())
                if cell.cell_type == "markdown"
                else None
            )
            if found:
                heading = (
                    re.sub(r"\s*\([^)]*points?\)\s*$", "", found.group(2)).split(":")[0].strip()
                )
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution") and meta.get("grade_id"):
                out.setdefault(heading, []).append(meta["grade_id"])
    return out


def gradebook_scores(course_root: Path, assignment: str) -> dict[str, dict]:
    """Student -> score after the late penalty, the penalty, the raw score, the maximum and
    each question's score, from the gradebook (manual grades included)."""
    from nbgrader.api import Gradebook

    asked = questions(course_root, assignment)
    out = {}
    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        found = gb.find_assignment(assignment)
        max_score = float(found.max_score)
        for submission in found.submissions:
            raw = float(submission.score or 0)
            penalty = float(submission.late_submission_penalty or 0)
            cells = {g.name: float(g.score or 0) for nb in submission.notebooks for g in nb.grades}
            out[submission.student.id] = {
                "score": max(0.0, raw - penalty),
                "raw_score": raw,
                "late_penalty": penalty,
                "max_score": max_score,
                "questions": {q: sum(cells.get(c, 0.0) for c in ids) for q, ids in asked.items()},
            }
    return out


# A submission that came but got no grade: the grader failed on it, or it held no notebook
# or an invalid one. Every export leaves its score blank (an LMS keeps what it has, as for
# a missing submission) and the report says why; a 0 would read as a grade.
UNGRADED = (fates.ERROR, fates.NO_NOTEBOOK, fates.INVALID_NOTEBOOK)


def ungraded(course_root: Path, assignment: str) -> dict[str, str]:
    """Student -> fate, for each submission the ledger says got no grade: a fate of
    ``UNGRADED``, or ``needs review`` with no points possible (an import that could not say
    which attempt is the student's; a grading that withheld points has them)."""
    from autograder.coordinator.ledger import Ledger

    return {
        e["student_id"]: e["fate"]
        for e in Ledger(course_root, assignment).entries()
        if e.get("fate") in UNGRADED
        or (e.get("fate") == fates.NEEDS_REVIEW and e.get("max_score") is None)
    }


def from_gradebook(course_root: Path, assignment: str, outcomes: list[dict]) -> list[dict]:
    """The outcomes with the gradebook's scores: what every report and export shows."""
    scores = gradebook_scores(course_root, assignment)
    none = ungraded(course_root, assignment)
    # An ungraded submission has no score, as in grades.csv: the gradebook's 0 for it is
    # no grade, and the class report leaves it out.
    return [
        {**o, "score": None, "max_score": None}
        if o["student_id"] in none
        else {**o, **scores[o["student_id"]]}
        if o["student_id"] in scores
        else o
        for o in outcomes
    ]


def with_manual_grades(course_root: Path, assignment: str, students) -> list[str]:
    """Those of ``students`` whose submission has a manual score or comment (formgrader)."""
    from nbgrader.api import Gradebook, MissingEntry

    found = []
    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        for student in sorted(students):
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            if any(
                g.manual_score is not None for nb in submission.notebooks for g in nb.grades
            ) or any(c.manual_comment for nb in submission.notebooks for c in nb.comments):
                found.append(student)
    return found


def question_column(assignment: str, question: str) -> str:
    """A question's column in grades.csv: "gpu_tensors Question 1 (raw)"."""
    return f"{assignment} {question} (raw)"


# nbgrader's own grades.csv columns (its CsvExportPlugin), in its order.
NBGRADER_COLUMNS = (
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
)


def _roster_order(student) -> tuple:
    return tuple(
        (name is not None, name or "") for name in (student.last_name, student.first_name)
    ) + (student.id,)


def nbgrader_rows(gb, assignments: list[str]) -> list[dict[str, str]]:
    """The rows of nbgrader's ``nbgrader export`` (CsvExportPlugin), with its values: a
    student with no submission has 0, and score is the raw score less the late penalty.
    Made here, not by the plugin, because the plugin joins its fields with commas
    unquoted: a roster name such as "March, Jr." shifted every column after it."""
    from nbgrader.api import MissingEntry

    rows = []
    for assignment in gb.assignments:
        if assignment.name not in assignments:
            continue
        # nbgrader's own order (last name, first name, a missing one first), then the id:
        # students without names came in the order they were graded, run after run.
        for student in sorted(gb.students, key=_roster_order):
            row = {
                "assignment": assignment.name,
                "duedate": assignment.duedate,
                "student_id": student.id,
                "last_name": student.last_name,
                "first_name": student.first_name,
                "email": student.email,
                "max_score": assignment.max_score,
            }
            try:
                submission = gb.find_submission(assignment.name, student.id)
            except MissingEntry:
                row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
            else:
                penalty = submission.late_submission_penalty
                row.update(
                    timestamp=submission.timestamp,
                    raw_score=submission.score,
                    late_submission_penalty=penalty,
                    score=max(0.0, submission.score - penalty),
                )
            rows.append({k: "" if v is None else str(v) for k, v in row.items()})
    return rows


def write_csv_atomically(dest: Path, header: list[str], rows: list) -> None:
    """A CSV file that is whole or as it was: written beside ``dest``, then renamed over it
    (an export that stops halfway never leaves a cut-down grades file for an upload)."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        if rows and isinstance(rows[0], dict):
            writer: csv.DictWriter | csv.writer = csv.DictWriter(f, header)
            writer.writeheader()
        else:
            writer = csv.writer(f)
            writer.writerow(header)
        writer.writerows(rows)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dest)


def export_grades(course_root: Path, assignments: list[str], dest: Path) -> None:
    """nbgrader's CSV export of these assignments, a row per student and assignment (every
    field quoted as CSV needs), with a column per question beside it."""
    from nbgrader.api import Gradebook

    config = grading_config(course_root)
    with Gradebook(config.CourseDirectory.db_url) as gb:
        rows = nbgrader_rows(gb, list(assignments))
    # Then a column per question (Otter's final_grades.csv has one per question), beside
    # nbgrader's own columns: score there is already after the late penalty. A column is
    # named for its unit (units' "Question 2"s differ) and says it is before the penalty,
    # as nbgrader's raw_score is.
    per_student = {a: gradebook_scores(course_root, a) for a in assignments}
    columns = {
        a: {question_column(a, q): q for q in questions(course_root, a)} for a in assignments
    }
    names = [name for a in assignments for name in columns[a]]
    none = {a: ungraded(course_root, a) for a in assignments}
    listed = {(row["assignment"], row["student_id"]) for row in rows}
    for assignment in assignments:  # every ungraded submission has its (blank) row
        for student in sorted(none[assignment]):
            if (assignment, student) not in listed:
                rows.append({"assignment": assignment, "student_id": student})
    for row in rows:
        asked = per_student.get(row["assignment"], {}).get(row["student_id"], {})
        own = columns.get(row["assignment"], {})
        for name in names:
            value = asked.get("questions", {}).get(own[name]) if name in own else None
            row[name] = "" if value is None else f"{value:g}"
        if row["student_id"] in none.get(row["assignment"], {}):
            for name in ("raw_score", "late_submission_penalty", "score", *names):
                row[name] = ""
    write_csv_atomically(dest, [*NBGRADER_COLUMNS, *names], rows)


# Canvas's gradebook import: these identity columns, then one column per assignment, and
# a "Points Possible" row (as in Canvas's own gradebook export) that gives a new
# assignment column its points. Rows are matched by SIS Login ID: the nbgrader student id.
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


class CanvasExport(Configurable):
    """How ``--export canvas`` names its columns."""

    columns = Dict(
        Unicode(),
        default_value={},
        help=(
            "Assignment id -> the header of an existing Canvas assignment's column, as Canvas's "
            "own export writes it, 'Name (id)': e.g. {'gpu_tensors': 'GPU tensors (48213)'}. "
            "Without one, the column is the assignment id and Canvas makes a new assignment."
        ),
    ).tag(config=True)


def export_canvas(course_root: Path, assignments: list[str], dest: Path) -> Path:
    """The grades in the CSV form Canvas's gradebook import accepts: after the late penalty;
    for a student with no submission, 0 once the assignment is out (someone has submitted,
    and its due date is past; a unit with no due date is never out), else an empty cell,
    which Canvas leaves alone; for
    a submission that got no grade (``UNGRADED``), an empty cell too."""
    from datetime import datetime, timezone

    from nbgrader.api import Gradebook, MissingEntry

    config = grading_config(course_root)
    headers = CanvasExport(config=config).columns
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    none = {a: ungraded(course_root, a) for a in assignments}
    with Gradebook(config.CourseDirectory.db_url) as gb:
        found = [gb.find_assignment(a) for a in assignments]
        points = [a.max_score for a in found]
        # Out: someone has submitted and its due date is past. A unit with no due date is
        # never out: the first early submission would otherwise put a 0 over every other
        # student's grade in Canvas (an outside instructor's run).
        released = [
            bool(a.submissions) and a.duedate is not None and a.duedate < now for a in found
        ]
        rows = []
        for student in sorted(gb.students, key=lambda s: s.id):
            name = ", ".join(n for n in (student.last_name, student.first_name) if n) or student.id
            scores = []
            for assignment, due in zip(assignments, released):
                if student.id in none[assignment]:  # came, but no grade: Canvas keeps its own
                    scores.append("")
                    continue
                try:
                    submission = gb.find_submission(assignment, student.id)
                except MissingEntry:
                    scores.append("0" if due else "")
                    continue
                penalty = submission.late_submission_penalty or 0  # nbgrader's late penalty
                scores.append(f"{max(0.0, submission.score - penalty):g}")
            rows.append([name, "", "", student.id, "", *scores])
    points_row = ["Points Possible", "", "", "", "", *(f"{p:g}" for p in points)]
    header = [*CANVAS_COLUMNS, *(headers.get(a, a) for a in assignments)]
    write_csv_atomically(dest, header, [points_row, *rows])
    return dest


def write_class_report(
    course_root: Path, assignment: str, outcomes: list[dict], folder: Path
) -> Path:
    from autograder.coordinator.class_report import write

    return write(course_root, assignment, outcomes, folder)


def write_report(outcomes: list[dict], folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = folder / "report.json", folder / "report.csv"
    json_path.write_text(json.dumps(outcomes, indent=1), encoding="utf-8")
    names = list(dict.fromkeys(q for o in outcomes for q in o.get("questions", {})))
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, REPORT_FIELDS + tuple(names), extrasaction="ignore")
        writer.writeheader()
        for o in outcomes:
            writer.writerow(
                {
                    **o,
                    **{q: f"{v:g}" for q, v in o.get("questions", {}).items()},
                    "details": printable("; ".join(o.get("details") or [])),
                }
            )
    return json_path, csv_path


def summary_table(outcomes: list[dict]) -> str:
    """One line per submission, then a count per fate."""
    rows = [("student", "fate", "score", "late penalty", "note")]
    for o in outcomes:
        score = "" if o.get("score") is None else f"{o['score']:g}"
        if o.get("max_score"):
            score += f"/{o['max_score']:g}"
        late = (
            f"-{o['late_penalty']:g} from a raw {o['raw_score']:g}" if o.get("late_penalty") else ""
        )
        # A ledger written before names were escaped may still hold a student's control
        # characters: the table never lets them reach the terminal.
        note = printable("; ".join(o.get("details") or []))
        rows.append((printable(o["student_id"]), o["fate"], score, late, note[:70]))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  ----")
    counts = Counter(o["fate"] for o in outcomes)
    lines.append("")
    lines.append("  ".join(f"{fate}: {counts[fate]}" for fate in FATES if counts[fate]))
    # The table is the whole class; this line is what this run did.
    done = Counter(o["this_run"] for o in outcomes if o.get("this_run"))
    if done:
        said = ", ".join(f"{done[k]} {THIS_RUN[k]}" for k in THIS_RUN if done[k])
        lines.append(f"this run: {said}")
    return "\n".join(lines)


THIS_RUN = {
    "graded": "graded",
    "failed": "failed in the grader (graded again next run)",
    "rejected": "refused before grading",
    "import": "left by an import",
    "unchanged": "unchanged since graded",
}
