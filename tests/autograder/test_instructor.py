"""The instructor's life cycle around grading, as nbgrader users live it (issue 19).

One small class goes through it all, once: the course folder belongs to an instructor
account and `course-grade` runs as root (sudo); three real Unix students fetch and submit
through the nbgrader exchange, one of them after the due date (penalty "zero"); the first
run is interrupted with Ctrl-C; one student forges a folder in another's name; a grader
error is retried; chosen students are graded again; a manual grade is given; feedback goes
back through the exchange, and each student fetches only their own page. The cheap checks
(bad options, a missing bubblewrap, the Canvas export) need no class.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import json
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder.config import load_course_config
from autograder.coordinator import cli
from tests.class_fixture import ASSIGNMENT, NOTEBOOK, TEST_LIMITS
from tests.run_as import run_as
from tests.submissions_gpu_tensors import RELEASE, SOLUTIONS, SOURCE, TOTAL, make_submission

BIN = Path(sys.executable).parent
CLI = str(BIN / "course-grade")
ROOT = Path(__file__).parents[2]
STUDENTS = ("cg19ada", "cg19bo", "cg19cy")  # ada: solution; bo: solution, late; cy: blank
INSTRUCTOR = "cg19prof"
LIFE_CONFIG = """
c.ExchangeCollect.check_owner = True
c.LateSubmissionPlugin.penalty_method = "zero"
"""


# -- cheap: no class ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, said",
    [
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--student", "../ada"], "is not a student id"),
        (["--report-only", "--force"], "grades nothing"),
    ],
)
def test_bad_options_are_refused(capsys, args, said):
    with pytest.raises(SystemExit) as stopped:
        cli.parse_args([ASSIGNMENT, *args])
    assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_several_students_are_named_by_repeating_the_option():
    assert cli.parse_args(
        [ASSIGNMENT, "--student", "stu_ada", "--student", "bo", "--force"]
    ).students == ["stu_ada", "bo"]


def test_the_summary_says_the_whole_class_and_what_this_run_did():
    from autograder.coordinator.report import summary_table

    outcomes = [
        {"student_id": "ada", "fate": "graded", "score": 28, "max_score": 28, "this_run": "graded"},
        {
            "student_id": "bo",
            "fate": "graded",
            "score": 0,
            "max_score": 28,
            "late_penalty": 28,
            "raw_score": 28,
            "this_run": "unchanged",
        },
        {"student_id": "cy", "fate": "invalid notebook", "score": None, "this_run": "rejected"},
        {"student_id": "di", "fate": "error", "score": None, "this_run": "failed"},
    ]
    table = summary_table(outcomes)
    assert "graded: 2  invalid notebook: 1" in table  # the whole class
    assert table.splitlines()[-1] == (
        "this run: 1 graded, 1 failed in the grader (graded again next run), "
        "1 refused before grading, 1 unchanged since graded"
    )
    assert "-28 from a raw 28" in next(line for line in table.splitlines() if line.startswith("bo"))


def test_a_missing_bubblewrap_is_said_before_the_course_is_touched(tmp_path, capsys):
    course = tmp_path / "course"
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(SOURCE, course / "source" / ASSIGNMENT / NOTEBOOK)
    (course / "nbgrader_config.py").write_text(
        (ROOT / "nbgrader_config.py").read_text() + '\nc.Sandbox.bwrap = "/nonexistent/bwrap"\n'
    )
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(make_submission(RELEASE, SOLUTIONS), inbox / "ada.ipynb")
    before = sorted(p.name for p in course.iterdir())
    assert cli.main([ASSIGNMENT, "--course", str(course), "--folder", str(inbox)]) == 2
    assert "bubblewrap" in capsys.readouterr().err
    assert sorted(p.name for p in course.iterdir()) == before  # no submitted/, no ledger
    # --no-sandbox warns; here it then stops at the next check (no gradebook entry yet).
    assert (
        cli.main([ASSIGNMENT, "--course", str(course), "--folder", str(inbox), "--no-sandbox"]) == 2
    )
    said = capsys.readouterr().err
    assert "WARNING: --no-sandbox" in said and "generate_assignment" in said
    assert sorted(p.name for p in course.iterdir()) == before


def test_all_names_every_unit_the_gradebook_lacks_and_one_command_for_them(tmp_path, capsys):
    """--all before the units are in the gradebook: one message names each missing unit,
    with the README's own command (--force), and nothing in the course is touched."""
    from nbgrader.api import Gradebook

    from autograder.config import grading_config

    course = tmp_path / "course"
    for unit in ("gpu_tensors", "gpu_training", "gpu_data_loading"):
        (course / "source" / unit).mkdir(parents=True)
        shutil.copy(ROOT / "source" / unit / f"{unit}.ipynb", course / "source" / unit)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    with Gradebook(grading_config(course).CourseDirectory.db_url) as gb:
        gb.update_or_create_assignment("gpu_training")
    before = sorted(p.name for p in course.iterdir())
    assert cli.main(["--all", "--course", str(course), "--no-sandbox"]) == 2
    said = capsys.readouterr().err
    assert "'gpu_data_loading', 'gpu_tensors' are not in the gradebook" in said
    from autograder.coordinator.grade import NBGRADER

    assert NBGRADER.endswith("/bin/nbgrader")  # this environment's, as the README writes it
    assert (
        f"`{NBGRADER} generate_assignment gpu_data_loading --force && "
        f"{NBGRADER} generate_assignment gpu_tensors --force`" in said
    )
    assert sorted(p.name for p in course.iterdir()) == before


def test_a_misspelled_unit_is_refused_with_the_nearest_name_and_the_course_units(tmp_path, capsys):
    course = tmp_path / "course"
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(SOURCE, course / "source" / ASSIGNMENT / NOTEBOOK)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    before = sorted(p.name for p in course.iterdir())
    typo = ASSIGNMENT[:-1]  # gpu_tensor
    assert cli.main([typo, "--course", str(course), "--no-sandbox"]) == 2
    said = capsys.readouterr().err
    assert f"did you mean {ASSIGNMENT}?" in said and f"The course's units: {ASSIGNMENT}" in said
    assert "?." not in said
    # a name wrong only in its case gets the name too
    assert cli.main([ASSIGNMENT.upper(), "--course", str(course), "--no-sandbox"]) == 2
    assert f"did you mean {ASSIGNMENT}?" in capsys.readouterr().err
    assert sorted(p.name for p in course.iterdir()) == before


def test_a_folder_that_is_not_the_course_says_so_and_how_to_name_it(tmp_path, capsys):
    """Run from another folder (a home folder): not "source/ is empty", but that this is
    no course folder, and --course."""
    assert cli.main([ASSIGNMENT, "--course", str(tmp_path), "--no-sandbox"]) == 2
    said = capsys.readouterr().err
    assert "has no source/ folder: is it the course folder?" in said and "--course DIR" in said
    assert "source/ is empty" not in said and list(tmp_path.iterdir()) == []


def test_canvas_targets_existing_columns_names_students_and_leaves_unreleased_units_empty(tmp_path):
    """A Canvas column named 'Name (id)' updates that assignment; a unit that is not out yet
    (nobody submitted, not yet due, or with no due date) is an empty cell, which Canvas
    leaves alone, not a 0 that would overwrite it; once out, no submission is a 0; the
    roster's names fill the Student column."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.report import export_canvas

    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        (ROOT / "nbgrader_config.py").read_text()
        + "\nc.CanvasExport.columns = {'unit1': 'Unit one (4821)'}\n"
    )
    past = datetime.datetime(2024, 3, 1)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_student("ada", first_name="Ada", last_name="Lovelace")
        gb.add_student("bo")
        gb.add_assignment("unit1", duedate=past)
        gb.add_assignment("unit2")
        gb.add_assignment("unit3", duedate=datetime.datetime(2999, 1, 1))
        for unit in ("unit1", "unit2", "unit3"):
            gb.add_submission(unit, "bo")
    units = ["unit1", "unit2", "unit3", "unit4"]  # unit4: nobody submitted
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_assignment("unit4")
    export_canvas(course, units, course / "grades-canvas.csv")
    with open(course / "grades-canvas.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][5:] == ["Unit one (4821)", "unit2", "unit3", "unit4"]
    # unit2 has no due date: one early submission (bo's) must not put 0s over the others'.
    assert rows[2] == ["Lovelace, Ada", "", "", "ada", "", "0", "", "", ""]
    assert rows[3] == ["bo", "", "", "bo", "", "0", "0", "0", ""]


def test_grades_csv_names_each_question_column_for_its_unit(tmp_path):
    """With several units, "Question 2" means a different question in each: every column
    is named for its unit and said to be before the penalty, and a row fills only its own
    unit's columns."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.report import export_grades

    course = tmp_path / "course"
    units = ["gpu_tensors", "gpu_training"]
    for unit in units:
        shutil.copytree(ROOT / "source" / unit, course / "source" / unit)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_student("ada")
        for unit in units:
            gb.add_assignment(unit)
            gb.add_submission(unit, "ada")
    export_grades(course, units, course / "grades.csv")
    with open(course / "grades.csv", newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames or [], {r["assignment"]: r for r in reader}
    asked = [name for name in header if "Question" in name]
    assert "gpu_tensors Question 1 (raw)" in asked and "gpu_training Question 1 (raw)" in asked
    assert all(name.endswith(" (raw)") and name.split()[0] in units for name in asked)
    for unit in units:
        assert all((rows[unit][n] == "0") == n.startswith(unit + " ") for n in asked), unit


def test_grades_csv_lists_students_in_nbgraders_order_then_by_id(tmp_path):
    """nbgrader orders students by last and first name; students with no names came out in
    the order they were first graded, which changed from run to run. Ties go by id."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.report import export_grades

    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_assignment(ASSIGNMENT)
        for student in ("zed", "bo", "ada"):  # graded in this order
            gb.add_student(student)
        gb.add_student("jo", last_name="March", first_name="Jo")
        gb.add_student("amy", last_name="March", first_name="Amy")
        gb.add_student("al", last_name="Alcott", first_name="Louisa")
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    with open(course / "grades.csv", newline="") as f:
        order = [r["student_id"] for r in csv.DictReader(f)]
    assert order == ["ada", "bo", "zed", "al", "amy", "jo"]


def test_a_roster_name_with_a_comma_or_a_quote_keeps_every_column_of_grades_csv(tmp_path):
    """nbgrader's CSV export joins its fields with commas, unquoted: after `nbgrader db
    student import` of "March, Jr.", a fresh instructor's every run stopped with a
    traceback and left grades.csv cut down. Every field is quoted as CSV needs, and the
    nbgrader columns keep their names and values."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.report import NBGRADER_COLUMNS, export_grades

    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_assignment(ASSIGNMENT, duedate=datetime.datetime(2024, 3, 1))
        gb.add_student("stu_jo", first_name='Jo "JJ"', last_name="March, Jr.", email="jo@x")
        gb.add_student("ada")
        gb.add_submission(ASSIGNMENT, "ada")
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    with open(course / "grades.csv", newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames or [], {r["student_id"]: r for r in reader}
    assert header[: len(NBGRADER_COLUMNS)] == list(NBGRADER_COLUMNS)
    assert None not in rows["stu_jo"]  # no field left over past the header
    jo = rows["stu_jo"]
    assert (jo["last_name"], jo["first_name"], jo["email"]) == ("March, Jr.", 'Jo "JJ"', "jo@x")
    assert (jo["raw_score"], jo["score"], jo["max_score"]) == (
        "0.0",
        "0.0",
        rows["ada"]["max_score"],
    )
    assert jo["duedate"] == "2024-03-01 00:00:00" and jo["timestamp"] == ""
    assert not list(course.glob(".*.tmp"))  # written beside it, then renamed over it


def test_a_submission_without_a_grade_is_blank_in_every_export_and_the_report_says_why(tmp_path):
    """eve's grading failed (fate error), dave's folder held no notebook, erin an invalid one: no
    export gives them a 0 (which would overwrite the LMS's grade); both grades.csv and
    grades-canvas.csv have their row with an empty score, and report.csv says why. ada's
    grade and fay's missing submission (0 once the unit is out) are as before."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.grade import recorded_outcomes
    from autograder.coordinator.ledger import Ledger
    from autograder.coordinator.report import (
        export_canvas,
        export_grades,
        from_gradebook,
        write_report,
    )
    from autograder.fates import Outcome

    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_assignment(ASSIGNMENT, duedate=datetime.datetime(2024, 3, 1))
        for student in ("ada", "dave", "eve", "erin", "fay", "gus"):
            gb.add_student(student)
        for student in ("ada", "dave", "eve", "erin", "gus"):  # _zero_submission leaves such rows
            gb.add_submission(ASSIGNMENT, student)
    ledger = Ledger(course, ASSIGNMENT)
    outcomes = [
        Outcome("ada", "graded", 0.0, 0.0).as_dict(),
        Outcome("dave", "no notebook", 0.0, None, ["no gpu_tensors.ipynb"]).as_dict(),
        Outcome("eve", "error", None, None, ["nbgrader autograde failed: X"]).as_dict(),
        Outcome("erin", "invalid notebook", 0.0, None, ["not JSON"]).as_dict(),
        # An import that could not say which attempt is gus's (two with one date).
        Outcome("gus", "needs review", 0.0, None, ["two attempts with the same date"]).as_dict(),
    ]
    for outcome in outcomes:
        ledger.put(outcome)
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    export_canvas(course, [ASSIGNMENT], course / "grades-canvas.csv")
    write_report(from_gradebook(course, ASSIGNMENT, outcomes), course / "reports")
    with open(course / "grades.csv", newline="") as f:
        grades = {r["student_id"]: r for r in csv.DictReader(f)}
    with open(course / "grades-canvas.csv", newline="") as f:
        canvas = {r[3]: r[5] for r in list(csv.reader(f))[2:]}
    with open(course / "reports" / "report.csv", newline="") as f:
        reported = {r["student_id"]: r for r in csv.DictReader(f)}
    for student, fate in (
        ("dave", "no notebook"),
        ("eve", "error"),
        ("erin", "invalid notebook"),
        ("gus", "needs review"),
    ):
        assert grades[student]["score"] == "" and grades[student]["raw_score"] == "", student
        assert grades[student][f"{ASSIGNMENT} Question 1 (raw)"] == "", student
        assert canvas[student] == "", student
        assert reported[student]["fate"] == fate and reported[student]["max_score"] == "", student
        assert reported[student]["score"] == "", student  # no grade, not the gradebook's 0
    assert reported["eve"]["details"] == "nbgrader autograde failed: X"
    assert float(grades["ada"]["score"]) == 0 and canvas["ada"] == "0"
    assert float(grades["fay"]["score"]) == 0 and canvas["fay"] == "0"
    # Nothing submitted is said in its own words, apart from a folder without the notebook.
    said = {o["student_id"]: o for o in recorded_outcomes(course, ASSIGNMENT)}
    assert (said["fay"]["fate"], said["fay"]["score"]) == ("not submitted", 0.0)
    # 0 of the assignment's full marks, as grades.csv says, never 0 of a blank
    assert said["fay"]["max_score"] == float(grades["fay"]["max_score"])
    assert said["dave"]["fate"] == "no notebook"


def test_a_folder_not_named_by_a_plain_id_is_no_grade_in_every_export_never_a_0(tmp_path):
    """Plain nbgrader's collect, or an instructor, can make submitted/<id> for an id
    course-grade does not grade (an e-mail address, an accented name: a JupyterHub user's).
    Such a folder was skipped without a word, and its student on the roster went to the LMS
    as "not submitted", 0 (outside review 71). Now it is "needs review" with the reason, and
    no export gives it a score, on the roster or not; no grading process starts for it."""
    from nbgrader.api import Gradebook

    from autograder.coordinator import grade, inbox
    from autograder.coordinator.report import (
        export_canvas,
        export_grades,
        from_gradebook,
        write_report,
    )
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.add_student("José")  # on the roster: the instructor's own ids
        gb.add_student("ada lovelace")
    # ada@uni.edu is not on the roster; "=SUM(1)" is no one's: a spreadsheet would read it as
    # a formula (attack 72), nor is "ｓ000" (fullwidth), a look-alike of a classmate's id
    # (attack 73): neither is in any export.
    for student in ("ada@uni.edu", "José", "ada lovelace", "=SUM(1)", "ｓ000"):
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(make_submission(RELEASE, SOLUTIONS), folder / NOTEBOOK)
    outcomes = grade.grade_assignment(course, ASSIGNMENT, executor=None)
    said = {o["student_id"]: o for o in outcomes}
    assert "=SUM(1)" not in said and "ｓ000" not in said
    for student in ("ada@uni.edu", "José", "ada lovelace"):
        assert said[student]["fate"] == "needs review", said[student]
        assert said[student]["details"] == [inbox.NOT_A_PLAIN_ID]
        assert said[student]["score"] is None
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    export_canvas(course, [ASSIGNMENT], course / "grades-canvas.csv")
    write_report(from_gradebook(course, ASSIGNMENT, outcomes), course / "reports")
    with open(course / "grades.csv", newline="", encoding="utf-8") as f:
        grades = {r["student_id"]: r for r in csv.DictReader(f)}
    with open(course / "grades-canvas.csv", newline="", encoding="utf-8") as f:
        canvas = {r[3]: r[5] for r in list(csv.reader(f))[2:]}
    with open(course / "reports" / "report.csv", newline="", encoding="utf-8") as f:
        reported = {r["student_id"]: r for r in csv.DictReader(f)}
    assert not {"=SUM(1)", "ｓ000"} & (set(grades) | set(reported))
    for student in ("ada@uni.edu", "José", "ada lovelace"):
        assert grades[student]["score"] == "", grades[student]
        assert canvas.get(student, "") == "", canvas
        assert (reported[student]["fate"], reported[student]["score"]) == ("needs review", "")
    # A later run says the same (no grade kept from an earlier one, none made up).
    again = {o["student_id"]: o for o in grade.recorded_outcomes(course, ASSIGNMENT)}
    assert again["ada@uni.edu"]["fate"] == "needs review"


def test_a_date_in_the_exchanges_named_zone_is_graded_at_its_true_moment(tmp_path):
    """With c.Exchange.timezone = "America/New_York", nbgrader dates a submission "10:00
    EDT": 14:00 UTC. The grader refused the date ("needs review", no grade), and plain
    nbgrader reads EDT as UTC (on time before a 12:00 UTC due date). Graded here at 14:00
    UTC: late, and with the "zero" penalty 0, in every export (outside review 71)."""
    from nbgrader.api import Gradebook

    from autograder.coordinator import grade
    from autograder.coordinator.report import export_canvas, export_grades
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text()
        + '\nc.Exchange.timezone = "America/New_York"\n'
        + 'c.LateSubmissionPlugin.penalty_method = "zero"\n'
    )
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=datetime.datetime(2024, 7, 1, 12))
    for student, stamp in (
        ("ada", "2024-07-01 10:00:00.000000 EDT"),
        ("bo", "2024-07-01 07:00:00 EDT"),
    ):
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(make_submission(RELEASE, SOLUTIONS), folder / NOTEBOOK)
        (folder / "timestamp.txt").write_text(stamp)
    said = {o["student_id"]: o for o in grade.grade_assignment(course, ASSIGNMENT, jobs=1)}
    assert said["ada"]["fate"] == said["bo"]["fate"] == "graded", said
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    export_canvas(course, [ASSIGNMENT], course / "grades-canvas.csv")
    with open(course / "grades.csv", newline="") as f:
        grades = {r["student_id"]: r for r in csv.DictReader(f)}
    with open(course / "grades-canvas.csv", newline="") as f:
        canvas = {r[3]: r[5] for r in list(csv.reader(f))[2:]}
    assert float(grades["ada"]["score"]) == 0, grades["ada"]
    assert float(grades["ada"]["late_submission_penalty"]) == TOTAL
    assert grades["ada"]["timestamp"].startswith("2024-07-01 14:00:00")
    assert float(grades["bo"]["score"]) == TOTAL  # 07:00 EDT: 11:00 UTC, on time
    assert canvas["ada"] == "0" and float(canvas["bo"]) == TOTAL


PLUGIN = """
from nbgrader.plugins import LateSubmissionPlugin


class Hourly(LateSubmissionPlugin):
    def late_submission_penalty(self, student_id, score, total_seconds):
        return min(score, (total_seconds // 3600) + 1)
"""


def test_a_late_penalty_plugin_beside_the_config_is_used_as_nbgrader_uses_it(tmp_path):
    """nbgrader imports c.AssignLatePenalties.plugin_class from the course folder; every
    submission of such a course was course-grade's `error` (outside review 71). The module
    now travels with the course to the workers: 2.5 h late costs 3 points everywhere. A
    plugin that cannot be imported is said before anything is graded."""
    from nbgrader.api import Gradebook

    from autograder.coordinator import grade
    from autograder.coordinator.grade import InstructorError
    from autograder.coordinator.report import export_canvas, export_grades
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    (course / "penalties_cg71.py").write_text(PLUGIN)
    config = (course / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(
        config + '\nc.AssignLatePenalties.plugin_class = "penalties_cg71.Hourly"\n'
    )
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=datetime.datetime(2024, 7, 1, 12))
    folder = course / "submitted" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(make_submission(RELEASE, SOLUTIONS), folder / NOTEBOOK)
    (folder / "timestamp.txt").write_text("2024-07-01 14:30:00 UTC")
    try:
        said = {o["student_id"]: o for o in grade.grade_assignment(course, ASSIGNMENT, jobs=1)}
        assert said["ada"]["fate"] == "graded", said["ada"]
        export_grades(course, [ASSIGNMENT], course / "grades.csv")
        export_canvas(course, [ASSIGNMENT], course / "grades-canvas.csv")
        with open(course / "grades.csv", newline="") as f:
            (row,) = [r for r in csv.DictReader(f) if r["student_id"] == "ada"]
        with open(course / "grades-canvas.csv", newline="") as f:
            canvas = {r[3]: r[5] for r in list(csv.reader(f))[2:]}
        assert float(row["late_submission_penalty"]) == 3 and float(row["score"]) == TOTAL - 3
        assert float(canvas["ada"]) == TOTAL - 3
        # One that cannot be imported: said before anything is graded.
        (course / "nbgrader_config.py").write_text(
            config + '\nc.AssignLatePenalties.plugin_class = "no_such_module_cg71.Hourly"\n'
        )
        with pytest.raises(InstructorError, match="cannot be imported"):
            grade.grade_assignment(course, ASSIGNMENT, jobs=1, force=True)
        # One that reads a file kept beside it, which the graders do not get: it imported in
        # the course folder and failed on every worker, one submission at a time (attack 77).
        (course / "extensions_cg77.json").write_text("{}")
        (course / "penalties_cg77b.py").write_text(
            "from pathlib import Path\n"
            "EXTENSIONS = (Path(__file__).parent / 'extensions_cg77.json').read_text()\n" + PLUGIN
        )
        (course / "nbgrader_config.py").write_text(
            config + '\nc.AssignLatePenalties.plugin_class = "penalties_cg77b.Hourly"\n'
        )
        with pytest.raises(InstructorError, match="not from the files the graders get"):
            grade.grade_assignment(course, ASSIGNMENT, jobs=1, force=True)
        # One that gives NaN (a blank cell of a spreadsheet of extensions): nbgrader stores
        # NULL, read as no penalty, and the late submission had full marks everywhere
        # (outside attack 77). Now withheld, with the reason.
        (course / "penalties_cg77.py").write_text(
            PLUGIN.replace("min(score, (total_seconds // 3600) + 1)", "float('nan')")
        )
        (course / "nbgrader_config.py").write_text(
            config + '\nc.AssignLatePenalties.plugin_class = "penalties_cg77.Hourly"\n'
        )
        said = {
            o["student_id"]: o
            for o in grade.grade_assignment(course, ASSIGNMENT, jobs=1, force=True)
        }
        assert said["ada"]["fate"] != "graded", said["ada"]
        assert "gave nan for a late submission" in " ".join(said["ada"]["details"])
        export_grades(course, [ASSIGNMENT], course / "grades.csv")
        export_canvas(course, [ASSIGNMENT], course / "grades-canvas.csv")
        with open(course / "grades.csv", newline="") as f:
            (row,) = [r for r in csv.DictReader(f) if r["student_id"] == "ada"]
        with open(course / "grades-canvas.csv", newline="") as f:
            canvas = {r[3]: r[5] for r in list(csv.reader(f))[2:]}
        assert row["score"] in ("", "0", "0.0") and canvas.get("ada", "") in ("", "0", "0.0")
    finally:
        sys.modules.pop("penalties_cg71", None)
        sys.modules.pop("penalties_cg77", None)
        sys.modules.pop("penalties_cg77b", None)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(course))


# -- the life cycle -----------------------------------------------------------------------
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="real Unix students need root and useradd",
)
pytestmark = [
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    )
]


def as_user(
    user: str, argv: list[str], cwd: Path, path: str = f"{BIN}:/usr/bin:/bin"
) -> subprocess.CompletedProcess:
    """Run as a real user (tests/run_as.py)."""
    pw = pwd.getpwnam(user)
    env = {"PATH": path, "HOME": pw.pw_dir, "USER": user, "LANG": "C.UTF-8"}
    return run_as(pw.pw_uid, pw.pw_gid, argv, env, cwd=cwd)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (result.args[-4:], result.stdout[-1500:], result.stderr[-3000:])
    return result


def course_grade(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLI, ASSIGNMENT, "--course", str(course), "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def report(course: Path) -> dict[str, dict]:
    rows = json.loads((course / "reports" / ASSIGNMENT / "report.json").read_text())
    return {r["student_id"]: r for r in rows}


def submit(user: str, course_id: str, exchange: Path, answers: dict) -> None:
    home = Path(pwd.getpwnam(user).pw_dir)
    (home / ".jupyter").mkdir(exist_ok=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {course_id!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
    )
    shutil.chown(home / ".jupyter", user, user)
    shutil.chown(home / ".jupyter" / "nbgrader_config.py", user, user)
    ok(as_user(user, ["nbgrader", "fetch_assignment", ASSIGNMENT], home))
    mine = home / ASSIGNMENT / NOTEBOOK
    nbformat.write(make_submission(mine, answers), mine)
    ok(as_user(user, ["nbgrader", "submit", ASSIGNMENT], home))


def make_users() -> None:
    for user in (*STUDENTS, INSTRUCTOR):
        subprocess.run(["userdel", "--remove", user], capture_output=True)
        ok(
            subprocess.run(
                ["useradd", "--create-home", "--user-group", user], capture_output=True, text=True
            )
        )


def remove_users() -> None:
    for user in (*STUDENTS, INSTRUCTOR):
        subprocess.run(["userdel", "--remove", user], capture_output=True)


def as_in_a_terminal() -> None:
    """In the child before exec: Ctrl-C's default action, as a shell gives a job it runs
    in the foreground. A suite started in the background (``cmd &`` without job control,
    nohup) has SIGINT ignored, which every child inherits: course-grade then ignores
    Ctrl-C, as any background job should, and the tests of Ctrl-C would test nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_after_first_grade(course: Path) -> subprocess.CompletedProcess:
    """Ctrl-C in the terminal (SIGINT to the whole process group) once one is graded."""
    ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
    run = subprocess.Popen(
        [CLI, ASSIGNMENT, "--course", str(course), "--no-progress", "--collect", "-j", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_in_a_terminal,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(ledger.glob("*.json")) and run.poll() is None:
        time.sleep(0.1)
    os.killpg(run.pid, signal.SIGINT)
    stdout, stderr = run.communicate(timeout=120)
    # args keeps the pid: the run's own folder in /tmp is named for it (cg-run-<pid>-*)
    return subprocess.CompletedProcess([*run.args, run.pid], run.returncode, stdout, stderr)


def every_score(course: Path) -> dict[str, dict]:
    """Each student's scores as the gradebook's grade rows, grades.csv, grades-canvas.csv
    and the report have them."""
    rows = (
        sqlite3.connect(course / "gradebook.db")
        .execute(
            "SELECT student.id, base_cell.name, grade.auto_score FROM grade "
            "JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
            "JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id "
            "JOIN student ON submitted_assignment.student_id = student.id "
            "JOIN base_cell ON grade.cell_id = base_cell.id"
        )
        .fetchall()
    )
    out = {s: {"cells": {}} for s in STUDENTS}
    for student, cell, score in rows:
        out[student]["cells"][cell] = score
    with open(course / "grades.csv", newline="") as f:
        for r in csv.DictReader(f):
            out[r["student_id"]]["grades.csv"] = float(r["score"]) if r["score"] else None
    with open(course / "grades-canvas.csv", newline="") as f:
        for r in list(csv.reader(f))[2:]:
            out[r[3]]["canvas"] = r[5]
    for student, o in report(course).items():
        out[student]["report"] = o.get("score")
    return out


def forge(exchange: Path, course_id: str, forger: str, victim: str) -> None:
    """The forger puts a later folder in the exchange's inbound under the victim's name."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    forged = exchange / course_id / "inbound" / f"{victim}+{ASSIGNMENT}+{stamp}+forged"
    pw = pwd.getpwnam(forger)
    writer = subprocess.run(
        [
            "setpriv",
            f"--reuid={pw.pw_uid}",
            f"--regid={pw.pw_gid}",
            "--clear-groups",
            "sh",
            "-c",
            f'mkdir "{forged}" && cat > "{forged}/{NOTEBOOK}"',
        ],
        input=nbformat.writes(make_submission(RELEASE, {})),
        text=True,
        capture_output=True,
    )
    assert writer.returncode == 0, writer.stderr


@pytest.fixture(scope="module")
def life():
    base = Path(tempfile.mkdtemp(prefix="cg-life-", dir="/tmp"))
    base.chmod(0o755)
    make_users()
    try:
        # The instructor's own course folder and the exchange (mode 1777), as the README
        # sets them up; the instructor runs .venv/bin/nbgrader without .venv/bin on PATH.
        course, exchange = base / "course", base / "exchange"
        (course / "source").mkdir(parents=True)
        exchange.mkdir(mode=0o1777)
        exchange.chmod(0o1777)
        shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
        (course / "nbgrader_config.py").write_text(
            (ROOT / "nbgrader_config.py").read_text()
            + TEST_LIMITS.format(exchange=str(exchange))
            + LIFE_CONFIG
        )
        prof = pwd.getpwnam(INSTRUCTOR)
        for path in [course, *course.rglob("*")]:
            os.chown(path, prof.pw_uid, prof.pw_gid, follow_symlinks=False)
        runs = {
            step: as_user(
                INSTRUCTOR, [str(BIN / "nbgrader"), step, ASSIGNMENT], course, path="/usr/bin:/bin"
            )
            for step in ("generate_assignment", "release_assignment")
        }
        course_id = load_course_config(course).CourseDirectory.course_id
        submit("cg19ada", course_id, exchange, SOLUTIONS)
        submit("cg19cy", course_id, exchange, {})
        time.sleep(1.1)
        due = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        time.sleep(1.1)
        submit("cg19bo", course_id, exchange, SOLUTIONS)
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
            gb.update_or_create_assignment(ASSIGNMENT, duedate=due)
        before = set(Path("/tmp").glob("cg-*"))
        runs["interrupted"] = interrupt_after_first_grade(course)  # as root (sudo)
        # What this run left: its run folder, or a folder with a copy of this course (other
        # test runs on the machine, pytest-xdist's other worker among them, make their own).
        pid = runs["interrupted"].args[-1]
        runs["left in /tmp"] = sorted(
            str(p)
            for p in set(Path("/tmp").glob("cg-*")) - before
            if p.name.startswith(f"cg-run-{pid}-") or p in ours(exchange)
        )
        ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
        runs["kept"] = {p.stem: p.read_text() for p in ledger.glob("*.json")}
        forge(exchange, course_id, "cg19cy", victim=sorted(runs["kept"])[0])
        runs["rest"] = course_grade(course, "--collect", "--export", "canvas")
        yield course, exchange, course_id, runs
    finally:
        remove_users()
        shutil.rmtree(base, ignore_errors=True)


@needs_root
@pytest.mark.slow
def test_the_instructors_nbgrader_runs_from_the_venv_without_it_on_path(life):
    """`.venv/bin/nbgrader generate_assignment` makes the gradebook, which runs `alembic` by
    name: the course's config puts its own environment's tools on PATH."""
    _, _, _, runs = life
    for step in ("generate_assignment", "release_assignment"):
        ok(runs[step])


@needs_root
@pytest.mark.slow
def test_ctrl_c_says_what_was_kept_and_the_next_run_grades_the_rest(life):
    course, _, _, runs = life
    stopped = runs["interrupted"]
    assert stopped.returncode == 130, stopped.stderr[-2000:]
    assert "Traceback" not in stopped.stderr and "KeyboardInterrupt" not in stopped.stderr
    assert "graded in this run are kept" in stopped.stderr
    assert "run the same command to grade the rest" in stopped.stderr
    # The workers' copies of the course and their kernels' templates are gone, and the
    # pool's semaphores were released (no "leaked semaphore" from the resource tracker).
    assert runs["left in /tmp"] == []
    assert "leaked" not in stopped.stderr, stopped.stderr[-2000:]
    rest = ok(runs["rest"])
    assert "SAWarning" not in rest.stderr and "Traceback" not in rest.stderr
    graded_now = {s for s, o in report(course).items() if o["this_run"] == "graded"}
    assert graded_now and graded_now < set(STUDENTS), rest.stdout  # the kept were not redone
    assert {s: o["fate"] for s, o in report(course).items()} == {s: "graded" for s in STUDENTS}


@needs_root
@pytest.mark.slow
def test_the_late_penalty_is_in_every_export_and_report(life):
    """bo submitted a full-marks notebook after the due date, with penalty "zero"."""
    course, _, _, runs = life
    bo = report(course)["cg19bo"]
    assert (bo["score"], bo["raw_score"], bo["late_penalty"]) == (0, TOTAL, TOTAL)
    assert report(course)["cg19ada"]["score"] == TOTAL
    with open(course / "grades.csv", newline="") as f:
        grades = {r["student_id"]: r for r in csv.DictReader(f)}
    assert float(grades["cg19bo"]["score"]) == 0 and float(grades["cg19ada"]["score"]) == TOTAL
    # A column per question, after nbgrader's own, named for its unit and said to be
    # before the penalty (bo's are his raw answers' points).
    assert float(grades["cg19ada"][f"{ASSIGNMENT} Question 1 (raw)"]) == 8
    assert grades["cg19cy"][f"{ASSIGNMENT} Question 4 (raw)"] == "0"
    assert float(grades["cg19bo"][f"{ASSIGNMENT} Question 1 (raw)"]) == 8
    with open(course / "grades-canvas.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == TOTAL
    canvas = {r[3]: r[5] for r in rows[2:]}
    assert float(canvas["cg19bo"]) == 0 and float(canvas["cg19ada"]) == TOTAL
    assert set(canvas) == set(report(course))  # every student
    with open(course / "reports" / ASSIGNMENT / "report.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert (float(rows["cg19bo"]["score"]), float(rows["cg19bo"]["late_penalty"])) == (0, TOTAL)
    bo_line = next(line for line in runs["rest"].stdout.splitlines() if line.startswith("cg19bo"))
    assert f"0/{TOTAL:g}" in bo_line and f"-{TOTAL:g} from a raw {TOTAL:g}" in bo_line
    page = (course / "reports" / ASSIGNMENT / "class-report.html").read_text()
    assert f"mean {TOTAL / 3:.1f} of {TOTAL:g}" in page
    # The student x question table: bo's answers earned every question, the penalty took all.
    assert (
        f"<td>cg19bo</td><td>8</td><td>6</td><td>9</td><td>7</td><td>0</td><td>{TOTAL:g}</td>"
        in page
    )


@needs_root
@pytest.mark.slow
def test_a_forgery_is_the_forgers_and_the_victim_keeps_their_grade(life):
    """Between two runs cy puts a folder in the exchange under the name of a student already
    graded: the victim keeps their grade and ledger entry (not graded again), and the
    refusal is cy's, in the report and the summary."""
    course, _, _, runs = life
    [victim] = sorted(runs["kept"])[:1]
    ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
    outcomes = report(course)
    assert outcomes[victim]["this_run"] == "unchanged" and outcomes[victim]["fate"] == "graded"
    assert (ledger / f"{victim}.json").read_text() == runs["kept"][victim]
    assert any(
        f"cg19cy submitted it under {victim}'s name" in d for d in outcomes["cg19cy"]["details"]
    )
    cy_line = next(line for line in runs["rest"].stdout.splitlines() if line.startswith("cg19cy"))
    assert victim in cy_line
    assert "not collected" in runs["rest"].stderr and "untouched" in runs["rest"].stderr


@needs_root
@pytest.mark.slow
def test_feedback_goes_back_through_the_exchange_each_student_their_own(life):
    course, exchange, course_id, _ = life
    released = ok(as_user(INSTRUCTOR, ["nbgrader", "release_feedback", ASSIGNMENT], course))
    assert "Traceback" not in released.stderr
    for user in STUDENTS:
        home = Path(pwd.getpwnam(user).pw_dir)
        ok(as_user(user, ["nbgrader", "fetch_feedback", ASSIGNMENT], home))
        pages = list((home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
        assert len(pages) == 1, (user, pages)
        own = course / "feedback" / user / ASSIGNMENT / f"{ASSIGNMENT}.html"
        assert pages[0].read_bytes() == own.read_bytes(), user
    # No student can list the released pages (nbgrader's outbound feedback folder is 0711).
    listing = as_user("cg19cy", ["ls", str(exchange / course_id / "feedback")], Path("/tmp"))
    assert listing.returncode != 0


@needs_root
@pytest.mark.slow
def test_chosen_students_are_graded_and_a_grader_error_is_retried(life):
    """bo's last grading failed for a reason of the grader's own (a worker interrupted):
    `--student cg19bo --student cg19cy` grades bo again, unchanged; cy, chosen but
    unchanged, is not graded without --force, and ada, not chosen, is left alone. Then
    `--student cg19cy --force` grades cy alone."""
    course, _, _, _ = life
    ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
    before = every_score(course)
    bo = json.loads((ledger / "cg19bo.json").read_text())
    (ledger / "cg19bo.json").write_text(
        json.dumps({**bo, "fate": "error", "details": ["grading worker failed: interrupted"]})
    )
    run = ok(
        course_grade(course, "--student", "cg19bo", "--student", "cg19cy", "--export", "canvas")
    )
    outcomes = report(course)
    assert {s for s, o in outcomes.items() if o["this_run"] == "graded"} == {"cg19bo"}, run.stdout
    assert outcomes["cg19bo"]["fate"] == "graded" and set(outcomes) >= set(STUDENTS)
    assert outcomes["cg19ada"]["this_run"] == "unchanged"
    # cy was chosen and not graded (unchanged): the instructor is told how to.
    assert "cg19cy: gpu_tensors unchanged since it was graded" in run.stderr
    assert "add --force to grade it again" in run.stderr
    # Graded again, a verdict about the submission is final: the next run leaves it.
    assert json.loads((ledger / "cg19bo.json").read_text())["fate"] == "graded"
    # ada, not chosen, keeps every score: in the gradebook's rows and in every export.
    assert every_score(course)["cg19ada"] == before["cg19ada"]
    run = ok(course_grade(course, "--student", "cg19cy", "--force", "--export", "canvas"))
    assert {s for s, o in report(course).items() if o["this_run"] == "graded"} == {"cg19cy"}
    after = every_score(course)
    for student in ("cg19ada", "cg19bo"):  # not chosen: nothing of theirs changed
        assert after[student] == before[student], (student, before[student], after[student])
    assert after["cg19ada"]["report"] == TOTAL and after["cg19ada"]["grades.csv"] == TOTAL
    # A misspelled id grades nothing and says so, with exit status 2 (was 0, and the
    # whole class's table, as if something had been graded).
    typo = course_grade(course, "--student", "cg19cyy", "--force")
    assert typo.returncode == 2 and "cg19cyy" in typo.stderr and "cg19cy" in typo.stderr
    assert "nothing was graded" in typo.stderr
    # The same with --all: an id with no submission of any unit (was exit 0, graded nothing).
    every_unit = subprocess.run(
        [CLI, "--all", "--course", str(course), "--no-progress", "--student", "cg19cyy"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert every_unit.returncode == 2, every_unit.stderr
    assert "for --student cg19cyy; nothing was graded" in every_unit.stderr
    assert "Students with one: cg19ada, cg19bo, cg19cy" in every_unit.stderr
    assert every_score(course) == after


@needs_root
@pytest.mark.slow
def test_report_only_shows_a_manual_grade_in_reports_exports_and_feedback(life):
    from nbgrader.api import Gradebook

    course, _, _, _ = life
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:  # as formgrader does
        grade = gb.find_grade("test_q1_device", NOTEBOOK[:-6], ASSIGNMENT, "cg19cy")
        grade.manual_score = 1.5
        gb.db.commit()
    run = ok(course_grade(course, "--report-only"))
    assert report(course)["cg19cy"]["score"] == 1.5
    assert all(o["this_run"] != "graded" for o in report(course).values())
    assert any(line.startswith("cg19cy") and "1.5/" in line for line in run.stdout.splitlines())
    with open(course / "grades.csv", newline="") as f:
        assert {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}["cg19cy"] == 1.5
    page = (course / "feedback" / "cg19cy" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "1.5" in page
    # Graded again, cy keeps the manual grade, and the run says the new page lacks it.
    run = ok(course_grade(course, "--student", "cg19cy", "--force"))
    assert "cg19cy had manual grades" in run.stderr and "--report-only" in run.stderr
    assert report(course)["cg19cy"]["score"] == 1.5
    assert "manual grades" not in ok(course_grade(course, "--student", "cg19ada", "--force")).stderr
    ok(course_grade(course, "--report-only"))


@needs_root
@pytest.mark.slow
def test_root_leaves_nothing_of_its_own_in_the_instructors_course(life):
    course, _, _, _ = life
    prof = pwd.getpwnam(INSTRUCTOR).pw_uid
    roots = [
        str(p.relative_to(course)) for p in [course, *course.rglob("*")] if p.lstat().st_uid != prof
    ]
    assert roots == []  # so the instructor's own nbgrader and course-grade work on it


@needs_root
@pytest.mark.slow
def test_no_student_work_or_grade_can_be_committed(life):
    """With the course's .gitignore, `git add -A` in the course folder takes only what the
    instructor wrote: config, source, release."""
    course, _, _, _ = life
    repo = Path(tempfile.mkdtemp(prefix="cg-git-"))
    try:
        shutil.copytree(course, repo / "course", symlinks=True)
        shutil.copy(ROOT / ".gitignore", repo / "course" / ".gitignore")
        # What the README has an instructor keep there: an LMS download, a --folder inbox.
        (repo / "course" / "submissions.zip").write_bytes(b"PK")
        (repo / "course" / "incoming").mkdir()
        (repo / "course" / "incoming" / "ada.ipynb").write_text("{}")
        # course-grade --log-file grading.log, in the course folder: ids, code, scores.
        (repo / "course" / "grading.log").write_text("ada: graded, 30.0 of 30.0 points\n")
        # the roster the README imports with `nbgrader db student import roster.csv`
        (repo / "course" / "roster.csv").write_text("id,first_name,last_name,email\n")
        ok(subprocess.run(["git", "init", "-q"], cwd=repo / "course", capture_output=True))
        listed = ok(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=all"],
                cwd=repo / "course",
                capture_output=True,
                text=True,
            )
        ).stdout
        paths = [line[3:] for line in listed.splitlines()]
        assert any(p.startswith("source/") for p in paths)
        assert [
            p
            for p in paths
            if p.split("/")[0] not in (".gitignore", "nbgrader_config.py", "source", "release")
        ] == []
    finally:
        shutil.rmtree(repo, ignore_errors=True)


SECRETS = (
    "source",
    "release",
    "submitted",
    "autograded",
    "feedback",
    "gradebook.db",
    "nbgrader_config.py",
)


def others_can_read(top: Path) -> list[str]:
    """What in ``top`` holds the course's secrets (solutions, hidden tests, a gradebook,
    submissions) and another user could read: every folder on the way open to others
    (o+x), the file itself o+r (or a folder listable, o+r)."""
    found = []
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder, name)
            rel = path.relative_to(top)
            if not any(part in SECRETS for part in rel.parts):
                continue
            ancestors = [top, *[top / p for p in list(rel.parents)[:-1][::-1]]]
            with contextlib.suppress(FileNotFoundError):
                if (
                    all(a.stat().st_mode & 0o001 for a in ancestors)
                    and path.lstat().st_mode & 0o004
                ):
                    found.append(str(path))
    return found


def ours(exchange: Path) -> dict[Path, Path]:
    """The grader's folders in /tmp that hold a copy of this course (its config names this
    course's exchange; other test runs on the machine make folders of their own there),
    each with the folder of the copy itself."""
    mine = {}
    # A local pool's workers make theirs in its run folder (autograder.worker.tmpdirs).
    for folder in [*Path("/tmp").glob("cg-*"), *Path("/tmp").glob("cg-run-*/cg-*")]:
        if folder.name.startswith(("cg-life-", "cg-run-")):  # this module's own class; a run
            continue
        for config in (folder / "nbgrader_config.py", folder / "course" / "nbgrader_config.py"):
            with contextlib.suppress(OSError):
                if str(exchange) in config.read_text():
                    mine[folder] = config.parent
    return mine


@needs_root
@pytest.mark.slow
def test_ctrl_c_in_a_forced_regrade_ends_at_once_and_leaves_no_copy_of_the_course(life):
    """Ctrl-C (SIGINT to the process group) while `--force -j 1` regrades the class: one
    Ctrl-C ends course-grade within seconds, exit status 130, with the message and no
    traceback. While it grades, nobody else can read the copies of the course a worker
    makes in /tmp (source, hidden tests, gradebook, submissions); after it, none is left.
    Every student has a manual grade: whoever it regraded before the Ctrl-C is named, since
    the run that grades the rest does not grade them again."""
    from nbgrader.api import Gradebook

    course, exchange, _, _ = life
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:  # as formgrader does
        for student in STUDENTS:
            gb.find_grade("test_q1_device", NOTEBOOK[:-6], ASSIGNMENT, student).manual_score = 1.0
        gb.db.commit()
    ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
    stamps = {p.name: p.stat().st_mtime_ns for p in ledger.glob("*.json")}
    run = subprocess.Popen(
        [CLI, ASSIGNMENT, "--course", str(course), "--no-progress", "--force", "-j", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_in_a_terminal,
    )
    seen, readable = set(), set()
    deadline = time.monotonic() + 300
    while (
        time.monotonic() < deadline
        and run.poll() is None
        and all(p.stat().st_mtime_ns == stamps.get(p.name) for p in ledger.glob("*.json"))
    ):
        for folder, copy in ours(exchange).items():
            seen.add(folder)
            with contextlib.suppress(FileNotFoundError):
                # A job's copy (in its scratch folder); the worker's prepared copy is
                # listable for a moment while nbgrader prepares it (worker.py makes it
                # 0755), though nothing in it can be read.
                if copy != folder and copy.stat().st_mode & 0o004:
                    readable.add(f"{copy} is listable by others")
            readable.update(others_can_read(folder))
        time.sleep(0.2)
    assert run.poll() is None, run.communicate()[1][-2000:]
    os.killpg(run.pid, signal.SIGINT)
    stopped = time.monotonic()
    try:
        _, stderr = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        pytest.fail("one Ctrl-C did not end course-grade within 60 s")
    took = time.monotonic() - stopped
    assert run.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-2000:]
    assert "graded in this run are kept" in stderr
    assert took < 30, took
    assert seen, "saw no copy of the course while it graded"
    assert readable == set()
    # The workers remove their copies as they stop (within LocalPool.STOP_GRACE).
    deadline = time.monotonic() + 10
    while any(p.exists() for p in seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [str(p) for p in seen if p.exists()] == [] and ours(exchange) == {}
    assert not [p for p in Path("/tmp").glob(f"cg-run-{run.pid}-*")]  # the run's folder too
    # What the forced run had not regraded yet is listed, and the next run, as the message
    # says, without --force, grades exactly those (an outside instructor's rerun had left
    # their old late penalties in every export).
    middle = {p.stem: p.stat().st_mtime_ns for p in ledger.glob("*.json")}
    regraded = {s for s, ns in middle.items() if ns != stamps[f"{s}.json"]}
    pending = json.loads((ledger.parent / "to-regrade.json").read_text())
    assert pending and set(pending) == set(middle) - regraded
    warned = [line for line in stderr.splitlines() if "had manual grades" in line]
    assert regraded and warned and all(s in warned[0] for s in regraded), stderr[-2000:]
    assert not any(s in warned[0] for s in pending)
    assert "run it again without --force to grade only what this run did not" in stderr
    again = subprocess.run(
        [CLI, ASSIGNMENT, "--course", str(course), "--no-progress", "-j", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    graded_again = {p.stem for p in ledger.glob("*.json") if p.stat().st_mtime_ns != middle[p.stem]}
    assert graded_again == set(pending)
    assert not (ledger.parent / "to-regrade.json").exists()


@pytest.mark.slow
def test_grades_csv_keeps_every_unit_of_the_gradebook_after_a_one_unit_run(tmp_path):
    """grades.csv is the whole course: a run on one unit rewrites it with every unit the
    gradebook holds (a one-unit run once dropped the other units' rows)."""
    from tests.class_fixture import build_course, nbgrader

    course = build_course(tmp_path)
    shutil.copytree(ROOT / "source" / "gpu_training", course / "source" / "gpu_training")
    nbgrader(course, "generate_assignment", "gpu_training", "--force")
    assert cli.graded_units(course, [ASSIGNMENT]) == sorted([ASSIGNMENT, "gpu_training"])
    assert cli.graded_units(course, ["gpu_training"]) == sorted([ASSIGNMENT, "gpu_training"])


@pytest.mark.slow
def test_an_ungradable_resubmission_takes_the_older_attempts_feedback_away(tmp_path):
    """An invalid resubmission scores nothing, and the older attempt's graded notebook and
    feedback page are removed: release_feedback once handed that old page back. Nor does
    it keep the older attempt's late penalty, which nbgrader's own export showed beside
    its 0 (outside attack 65)."""
    from nbgrader.api import Gradebook

    from autograder import fates
    from autograder.coordinator import grade
    from autograder.coordinator.ledger import Ledger
    from autograder.coordinator.report import export_grades
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    for kind in ("autograded", "feedback"):
        old = course / kind / "cg19bo" / ASSIGNMENT
        old.mkdir(parents=True)
        (old / "gpu_tensors.html").write_text("the older attempt's page")
    kept = course / "feedback" / "cg19ada" / ASSIGNMENT
    kept.mkdir(parents=True)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:  # the older attempt, graded
        gb.update_or_create_student("cg19bo")
        older = gb.update_or_create_submission(
            ASSIGNMENT, "cg19bo", timestamp=datetime.datetime(2026, 11, 20, 9, 0)
        )
        for notebook in older.notebooks:
            notebook.late_submission_penalty = 30.0
        gb.db.commit()
    grade._zero_submission(course, ASSIGNMENT, "cg19bo", "2026-12-01 10:30:00.000000 UTC")
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        submission = gb.find_submission(ASSIGNMENT, "cg19bo")
        assert submission.notebooks
        assert [n.late_submission_penalty for n in submission.notebooks] == [None]
        assert submission.score == 0 and not submission.late_submission_penalty
    assert not (course / "autograded" / "cg19bo" / ASSIGNMENT).exists()
    assert not (course / "feedback" / "cg19bo" / ASSIGNMENT).exists()
    assert kept.is_dir()  # another student's is left alone
    # grades.csv: this attempt's date beside its empty score, never the older attempt's.
    Ledger(course, ASSIGNMENT).put(
        fates.Outcome("cg19bo", fates.INVALID_NOTEBOOK, 0.0, None, ["not JSON"]).as_dict()
    )
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    with open(course / "grades.csv", newline="") as f:
        row = {r["student_id"]: r for r in csv.DictReader(f)}["cg19bo"]
    assert row["timestamp"].startswith("2026-12-01 10:30:00") and row["score"] == ""
    # An attempt without a date (an import that could not say which) has none.
    grade._zero_submission(course, ASSIGNMENT, "cg19bo")
    export_grades(course, [ASSIGNMENT], course / "grades.csv")
    with open(course / "grades.csv", newline="") as f:
        assert {r["student_id"]: r for r in csv.DictReader(f)}["cg19bo"]["timestamp"] == ""


def test_a_second_run_at_once_is_refused_and_changes_nothing(tmp_path, capsys):
    """Two runs on one course would grade the same submissions into one ledger and
    gradebook: the second is refused, says who holds the course, and touches nothing."""
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(make_submission(RELEASE, SOLUTIONS), inbox / "ada.ipynb")
    with cli.one_run_at_a_time(course):  # a run under way
        before = sorted(str(p.relative_to(course)) for p in course.rglob("*"))
        status = cli.main(
            [ASSIGNMENT, "--course", str(course), "--folder", str(inbox), "--no-sandbox"]
        )
        assert status == 2
        said = capsys.readouterr().err
        assert "another course-grade run (pid " in said and "Nothing was changed" in said
        assert sorted(str(p.relative_to(course)) for p in course.rglob("*")) == before
    # Once it has ended, the course is free again (the lock went with its holder).
    with cli.one_run_at_a_time(course):
        pass


def test_the_class_reports_cell_table_counts_only_graded_submissions(tmp_path):
    """An ungraded resubmission's zeros are no answers: the pass rates leave them out (they
    were counted, 15 submissions against 14 graded)."""
    from nbgrader.api import Gradebook

    from autograder.coordinator.class_report import pass_rates
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for student, full in (("cg19ada", True), ("cg19bo", False)):
            gb.update_or_create_student(student)
            submission = gb.update_or_create_submission(ASSIGNMENT, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    grade.auto_score = grade.max_score if full else 0
        gb.db.commit()
    rates = pass_rates(course, ASSIGNMENT, ["cg19ada"])  # bo's attempt was not graded
    assert rates and all(n == passed == 1 for _, n, passed, _ in rates.values()), rates
    both = pass_rates(course, ASSIGNMENT, ["cg19ada", "cg19bo"])
    assert all(n == 2 and passed == 1 for _, n, passed, _ in both.values()), both


@needs_root
def test_run_as_root_in_a_folder_that_is_no_course_its_files_stay_as_they_were(tmp_path):
    """course-grade run from the wrong folder (sudo) refuses, and hands nobody root's
    files there; in a course folder it gives them to the course's owner."""
    folder = tmp_path / "wrongdir"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    (folder / "roots.txt").write_text("root's")
    assert cli.main(["gpu_tensors", "--course", str(folder), "--no-progress"]) == 2
    assert (folder / "roots.txt").stat().st_uid == 0
    (folder / "nbgrader_config.py").write_text("")
    (folder / "source").mkdir()
    cli.give_to_course_owner(folder)
    assert (folder / "roots.txt").stat().st_uid == 65534


def test_the_class_reports_headline_leaves_out_who_submitted_nothing(tmp_path):
    """A student who submitted nothing has 0 of full marks in the exports, but is no graded
    submission: the headline counted them as graded and put their 0 in its mean."""
    from autograder.coordinator.class_report import write
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    full = float(TOTAL)
    outcomes = [
        {"student_id": "cg19ada", "fate": "graded", "score": full, "max_score": full},
        {"student_id": "cg19fay", "fate": "not submitted", "score": 0.0, "max_score": full},
    ]
    page = write(course, ASSIGNMENT, outcomes, tmp_path / "reports").read_text()
    assert f"2 students; 1 graded; mean {full:.1f} of {full:g}" in page


@pytest.mark.slow
def test_a_page_renamed_for_a_copied_secret_is_said_on_its_owners_line_until_regraded(tmp_path):
    """Attack 24, a01: att submitted vic's submission_secret.txt, so both pages got new
    random names; the note was on att's line alone, and went when att resubmitted without
    it, while vic's fetch_feedback still found nothing. Now vic's own line says so, in
    every run's report, until vic is graded again (which gives the page vic's name back)."""
    from tests.class_fixture import build_course

    course = build_course(tmp_path)
    secret = "v" * 64

    def hand_in(student: str, secret: str | None, version: int = 0) -> None:
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        nb = make_submission(RELEASE)
        nb.metadata["version"] = version  # a resubmission: another digest
        nbformat.write(nb, folder / NOTEBOOK)
        (folder / "submission_secret.txt").unlink(missing_ok=True)
        if secret:
            (folder / "submission_secret.txt").write_text(secret)

    def page_secret(student: str) -> str:
        return (course / "feedback" / student / ASSIGNMENT / "submission_secret.txt").read_text()

    def renamed_note(student: str) -> list[str]:
        return [d for d in report(course)[student]["details"] if "new random name" in d]

    hand_in("vic", secret)
    ok(course_grade(course, "-j", "1"))
    assert page_secret("vic") == secret and not renamed_note("vic")
    hand_in("att", secret)  # a copy of vic's
    ok(course_grade(course, "-j", "1"))
    assert page_secret("vic") != secret
    assert renamed_note("vic") and "att" in renamed_note("vic")[0]
    hand_in("att", None, version=1)  # att resubmits without it
    ok(course_grade(course, "-j", "1"))
    assert page_secret("vic") != secret  # vic still cannot fetch it...
    assert renamed_note("vic"), report(course)["vic"]  # ...and vic's line still says so
    assert not [d for d in report(course)["att"]["details"] if "also in the submission" in d]
    ok(course_grade(course, "-j", "1", "--student", "vic", "--force"))
    assert page_secret("vic") == secret and not renamed_note("vic")
