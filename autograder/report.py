"""What the instructor reads at the end: grades.csv, the report of fates, a summary table."""
from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

from autograder.config import grading_config
from autograder.fates import FATES

REPORT_FIELDS = ("student_id", "fate", "score", "max_score", "details",
                 "this_run", "seconds")


def export_grades(course_root: Path, assignment: str, dest: Path) -> None:
    """nbgrader's own CSV export, limited to this assignment."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    config = grading_config(course_root)
    plugin = CsvExportPlugin(config=config)
    plugin.to = str(dest)
    plugin.assignment = [assignment]
    with Gradebook(config.CourseDirectory.db_url) as gb:
        plugin.export(gb)


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
