"""What the instructor reads at the end: grades.csv (and an LMS's import format), the
report of fates, a summary table, and the class report (``autograder.class_report``)."""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from autograder.config import grading_config
from autograder.fates import FATES

REPORT_FIELDS = ("student_id", "fate", "score", "max_score", "details",
                 "this_run", "seconds")


def export_grades(course_root: Path, assignments: list[str], dest: Path) -> None:
    """nbgrader's own CSV export of these assignments: a row per student and assignment."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    config = grading_config(course_root)
    plugin = CsvExportPlugin(config=config)
    plugin.to = str(dest)
    plugin.assignment = list(assignments)
    with Gradebook(config.CourseDirectory.db_url) as gb:
        plugin.export(gb)


# Canvas's gradebook import: these identity columns, then one column per assignment, and
# a "Points Possible" row (as in Canvas's own gradebook export) that gives a new
# assignment column its points. Rows are matched by SIS Login ID: the nbgrader student id.
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def export_canvas(course_root: Path, assignments: list[str], dest: Path) -> Path:
    """The grades in the CSV form Canvas's gradebook import accepts."""
    from nbgrader.api import Gradebook, MissingEntry

    config = grading_config(course_root)
    with Gradebook(config.CourseDirectory.db_url) as gb:
        points = [gb.find_assignment(a).max_score for a in assignments]
        rows = []
        for student in sorted(gb.students, key=lambda s: s.id):
            name = ", ".join(n for n in (student.last_name, student.first_name) if n) or student.id
            scores = []
            for assignment in assignments:
                try:
                    scores.append(f"{gb.find_submission(assignment, student.id).score:g}")
                except MissingEntry:
                    scores.append("0")
            rows.append([name, "", "", student.id, "", *scores])
    with open(dest, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*CANVAS_COLUMNS, *assignments])
        writer.writerow(["Points Possible", "", "", "", "", *(f"{p:g}" for p in points)])
        writer.writerows(rows)
    return dest


def write_class_report(course_root: Path, assignment: str, outcomes: list[dict],
                       folder: Path) -> Path:
    from autograder.class_report import write

    return write(course_root, assignment, outcomes, folder)


def write_report(outcomes: list[dict], folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = folder / "report.json", folder / "report.csv"
    json_path.write_text(json.dumps(outcomes, indent=1), encoding="utf-8")
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, REPORT_FIELDS, extrasaction="ignore")
        writer.writeheader()
        for o in outcomes:
            writer.writerow({**o, "details": "; ".join(o.get("details") or [])})
    return json_path, csv_path


def summary_table(outcomes: list[dict]) -> str:
    """One line per submission, then a count per fate."""
    rows = [("student", "fate", "score", "note")]
    for o in outcomes:
        score = "" if o.get("score") is None else f"{o['score']:g}"
        if o.get("max_score"):
            score += f"/{o['max_score']:g}"
        note = "; ".join(o.get("details") or [])
        rows.append((o["student_id"], o["fate"], score, note[:70]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths) + "  ----")
    counts = Counter(o["fate"] for o in outcomes)
    lines.append("")
    lines.append("  ".join(f"{fate}: {counts[fate]}" for fate in FATES if counts[fate]))
    return "\n".join(lines)
