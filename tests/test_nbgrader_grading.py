"""The real nbgrader grades the gpu_tensors exercises right, with a real SQLite gradebook.

One temporary course folder (nbgrader_config.py + source/), one `generate_assignment`,
one `autograde` over every submission and one `generate_feedback`: each nbgrader run
starts a kernel that imports torch, so the whole class is graded in a single batch.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

import submissions as subs

pytestmark = pytest.mark.slow

# Tampered submissions: a learner with a mistake who also tries to dodge the failing test.
DELETED = ("deleted_test_cell", "float64_bytes", "test_q2_mb")
PASSED = ("pass_in_test_cells", "mib", ("test_q2_mb", "test_q2_size_mb"))


def _class_of_submissions() -> dict[str, nbformat.NotebookNode]:
    notebooks = {
        "solution": subs.make_submission(subs.RELEASE, subs.SOLUTIONS),
        "unmodified_release": subs.make_submission(subs.RELEASE, {}),
        "seed_rounded": subs.make_submission(subs.RELEASE, subs.SEED_ROUNDED),
    }
    for name, answers in subs.ALWAYS_EQUAL.items():
        notebooks[name] = subs.make_submission(subs.RELEASE, answers)
    for name, mistake in subs.MISTAKES.items():
        notebooks[name] = subs.make_submission(subs.RELEASE, mistake.answers)

    student, mistake, cell = DELETED
    notebooks[student] = subs.without_cell(notebooks[mistake], cell)
    student, mistake, cells = PASSED
    notebooks[student] = notebooks[mistake]
    for cell in cells:
        notebooks[student] = subs.with_cell_source(notebooks[student], cell, "pass")
    return notebooks


# nbgrader's gradebook runs the `alembic` command, so the venv's bin/ must be on PATH
# even when pytest is started as .venv/bin/python without activating the venv.
VENV_BIN = str(Path(sys.executable).parent)


@pytest.fixture(scope="module", autouse=True)
def venv_on_path():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        # The expected scores are those of a machine without a GPU (hardcodes_cuda fails
        # there); tests/test_release.py runs the hidden tests on CUDA where there is one.
        patch.setenv("CUDA_VISIBLE_DEVICES", "")
        yield


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
        cwd=course, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def course(tmp_path_factory, root, venv_on_path) -> Path:
    """A course folder with every submission autograded and its feedback generated."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(root / "nbgrader_config.py", course)
    shutil.copytree(root / "source" / subs.ASSIGNMENT, course / "source" / subs.ASSIGNMENT)
    _nbgrader(course, "generate_assignment", subs.ASSIGNMENT, "--force")
    for student, nb in _class_of_submissions().items():
        folder = course / "submitted" / student / subs.ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{subs.ASSIGNMENT}.ipynb")
    _nbgrader(course, "autograde", subs.ASSIGNMENT)
    _nbgrader(course, "generate_feedback", subs.ASSIGNMENT)
    return course


@pytest.fixture(scope="module")
def grades(course, venv_on_path) -> dict[str, dict]:
    """student -> {"score": total, "max": max, "cells": {grade_id: auto_score}}, from the gradebook."""
    result = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in gb.students:
            submission = gb.find_submission(subs.ASSIGNMENT, student.id)
            notebook = submission.notebooks[0]
            result[student.id] = {
                "score": submission.score,
                "max": submission.max_score,
                "manual": submission.needs_manual_grade,
                "cells": {grade.name: grade.auto_score for grade in notebook.grades},
            }
    return result


def _failed_cells(grade: dict) -> set[str]:
    return {name for name, score in grade["cells"].items() if score != subs.POINTS[name]}


def _feedback_text(course: Path, student: str) -> str:
    page = course / "feedback" / student / subs.ASSIGNMENT / f"{subs.ASSIGNMENT}.html"
    return html.unescape(page.read_text())


def _error_texts(course: Path, student: str) -> list[str]:
    nb = nbformat.read(course / "autograded" / student / subs.ASSIGNMENT / f"{subs.ASSIGNMENT}.ipynb", 4)
    return [
        "\n".join([output.get("evalue", ""), *output.get("traceback", [])])
        for cell in nb.cells if cell.cell_type == "code"
        for output in cell.outputs if output.output_type == "error"
    ]


def test_every_submission_is_graded(grades):
    assert set(grades) == set(_class_of_submissions())


def test_solution_scores_full_marks(grades):
    solution = grades["solution"]
    # Everything is autograded: no part waits for a person, so full marks are the whole total.
    assert solution["manual"] is False
    assert solution["max"] == subs.TOTAL == sum(subs.POINTS.values())
    assert solution["score"] == subs.expected_score(subs.SOLUTIONS)
    assert _failed_cells(solution) == set()


def test_unmodified_release_scores_zero_on_every_part(grades):
    release = grades["unmodified_release"]
    assert set(release["cells"]) == set(subs.POINTS)
    assert all(score == 0 for score in release["cells"].values()), release["cells"]
    assert release["score"] == subs.expected_score({}) == 0


def test_the_seeds_rounded_answers_earn_every_point(grades):
    """0.79 MB, 0.48 ms and 0.98 ms: the precision the exercises ask for, two figures."""
    assert _failed_cells(grades["seed_rounded"]) == set()
    assert grades["seed_rounded"]["score"] == subs.TOTAL


@pytest.mark.parametrize("name", sorted(subs.ALWAYS_EQUAL))
def test_answers_that_equal_anything_earn_at_most_a_tenth(grades, name):
    """Plain nbgrader, no integrity review: the checks alone must hold."""
    earned = {cell: score for cell, score in grades[name]["cells"].items() if score}
    assert grades[name]["score"] <= subs.ALWAYS_EQUAL_MAX, earned


@pytest.mark.parametrize("name", sorted(subs.MISTAKES))
def test_mistake_scores_its_partial_score(grades, name):
    mistake = subs.MISTAKES[name]
    assert _failed_cells(grades[name]) == set(mistake.fails)
    assert grades[name]["score"] == mistake.score < subs.TOTAL


@pytest.mark.parametrize("name", sorted(subs.MISTAKES))
def test_mistake_hint_appears_in_feedback(course, name):
    assert subs.MISTAKES[name].hint in _feedback_text(course, name)


@pytest.mark.parametrize("name", sorted(subs.MISTAKES))
def test_failure_messages_never_show_an_answer(course, name):
    errors = _error_texts(course, name)
    assert len(errors) == len(subs.MISTAKES[name].fails)
    for text in errors:
        assert subs.answer_values_in(text) == [], text
        # The message replaces the traceback, so no test source (and its expected values) shows.
        assert "Traceback" not in text and "check_close(" not in text, text


def test_deleting_a_test_cell_does_not_dodge_it(course, grades):
    student, mistake, cell = DELETED
    assert cell in grades[student]["cells"] and grades[student]["cells"][cell] == 0
    assert grades[student]["score"] == subs.MISTAKES[mistake].score
    assert subs.MISTAKES[mistake].hint in _feedback_text(course, student)


def test_replacing_test_code_with_pass_does_not_dodge_it(course, grades):
    student, mistake, cells = PASSED
    assert all(grades[student]["cells"][cell] == 0 for cell in cells)
    assert grades[student]["score"] == subs.MISTAKES[mistake].score
    assert subs.MISTAKES[mistake].hint in _feedback_text(course, student)
