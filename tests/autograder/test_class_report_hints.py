"""The class report's "mistakes most often hinted" quotes the tests, never a student.

A test's failure message can hold a student's words: an exception their function raised
(``call`` wraps its text) or a string answer. Issue 17's attack put "note from the course
staff: the grader is wrong..." into ten rows of the table; only words of the test cell's
own source (or of the checks every test calls) may be counted as a hint.
"""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from autograder.coordinator import class_report

CHECKS = """def call(name, *args):
    raise CheckFailed(f"{name}(...) raised {type(problem).__name__}: {text}")
KNOWN_ERRORS = [(("same device",), "mixed two devices in one operation: move the batch.")]
"""
TEST = """check_close("sgd_mb", answer("sgd_mb"), 200.0, hints=[
    (100.0, "that is the weights alone: training also keeps a gradient for every parameter."),
])
"""


def cell(source, **nbgrader):
    return new_code_cell(source, metadata={"nbgrader": {"schema_version": 3, **nbgrader}})


def course_with(tmp_path, messages: dict[str, str]):
    source = tmp_path / "source" / "unit"
    source.mkdir(parents=True)
    nb = new_notebook(
        cells=[
            cell(CHECKS, grade_id="checks", locked=True, grade=False, solution=False),
            cell(TEST, grade_id="test_sgd", grade=True, points=2, locked=True, solution=False),
        ]
    )
    nbformat.write(nb, source / "unit.ipynb")
    for student, message in messages.items():
        graded = tmp_path / "autograded" / student / "unit"
        graded.mkdir(parents=True)
        test = cell(TEST, grade_id="test_sgd", grade=True, points=2, locked=True, solution=False)
        test.outputs = [new_output("error", ename="CheckFailed", evalue=message, traceback=[])]
        nbformat.write(new_notebook(cells=[test]), graded / "unit.ipynb")
    return tmp_path


def test_only_the_tests_own_words_are_counted_as_hints(tmp_path):
    staff = (
        "note from the course staff: the grader is wrong on this question, "
        "give full marks; see http://example.org"
    )
    course = course_with(
        tmp_path,
        {
            "ada": "sgd_mb = 100.0: that is the weights alone: training also keeps a gradient for every parameter.",
            "bo": f"sgd_mb(...) raised ValueError: {staff}",
            "cy": f"sgd_mb = '{staff}': that is not what was asked",
            "di": "f(...) mixed two devices in one operation: move the batch.",
        },
    )
    counts = class_report.hinted_mistakes(course, "unit", ["ada", "bo", "cy", "di"])
    assert counts == {
        (
            "test_sgd",
            "that is the weights alone: training also keeps a gradient for every parameter.",
        ): 1,
        ("test_sgd", "mixed two devices in one operation: move the batch."): 1,
    }
    assert not any("course staff" in hint for _, hint in counts)


def test_the_page_shows_no_students_words_as_a_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(class_report, "pass_rates", lambda *a: {})  # no gradebook here
    monkeypatch.setattr(class_report, "_question_points", lambda *a: {})
    course = course_with(
        tmp_path,
        {
            f"s{i}": "f(...) raised RuntimeError: note from the course staff: give full marks"
            for i in range(10)
        },
    )
    page = class_report.write(course, "unit", [], tmp_path / "reports")
    assert "course staff" not in page.read_text()
