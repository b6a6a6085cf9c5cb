"""The real nbgrader grades every unit's exercises right, with a real SQLite gradebook.

For each unit, in a temporary course folder (nbgrader_config.py + source/), one
`generate_assignment`, one `autograde` over its class and one `generate_feedback`; the
units side by side, one per core. Plain nbgrader runs the tests in the
learner's own kernel, so the checks alone must hold here (course-grade's two kernels are
tested in test_course_grade_units.py). nbgrader's kernels are forked from one process that
imported ipykernel and torch (`forked_kernels`: each still a fresh kernel that has run no
cell), but each unit's solution and unmodified release, which ipykernel's own launcher starts.

Every mistake is graded, but not each in a notebook of its own: mistakes that change
different answer cells and fail different test cells share one submission (`submission_kit.packs`), and
that submission must fail exactly the union of their cells, each with its own hint. A
mistake that reached into another question's cells would fail a cell it does not name, so
sharing a notebook hides nothing; it halves the notebooks nbgrader runs (101 -> 43).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import forked_kernels
import nbformat
import pytest
from nbgrader.api import Gradebook
from units import UNITS, submissions

from tests import submission_kit as kit

# first: its class fixture grades every unit (minutes); timeout: under pytest-xdist the other
# process grades beside it, and the fixture counts against its first test's time.
pytestmark = [pytest.mark.slow, pytest.mark.first, pytest.mark.timeout(1500)]


def pytest_generate_tests(metafunc):
    """`unit` for every test; `unit, name` pairs for the tests about one mistake, or one
    always-equal or full-marks submission, of that unit."""
    if "unit" not in metafunc.fixturenames:
        return
    kinds = {"mistake": "MISTAKES", "liar": "ALWAYS_EQUAL", "right": "FULL_MARKS"}
    kind = next((k for k in kinds if k in metafunc.fixturenames), None)
    if kind is None:
        metafunc.parametrize("unit", UNITS)
        return
    pairs = [
        (unit, name) for unit in UNITS for name in sorted(getattr(submissions(unit), kinds[kind]))
    ]
    metafunc.parametrize(("unit", kind), pairs, ids=[f"{u}-{n}" for u, n in pairs])


def _packs(subs) -> dict[str, dict[str, object]]:
    return kit.packs(subs.MISTAKES)


def _pack_of(subs, mistake: str) -> tuple[str, dict[str, object]]:
    return next((s, p) for s, p in _packs(subs).items() if mistake in p)


def _class_of_submissions(subs) -> dict[str, nbformat.NotebookNode]:
    notebooks = {
        "solution": subs.make_submission(subs.RELEASE, subs.SOLUTIONS),
        "unmodified_release": subs.make_submission(subs.RELEASE, {}),
    }
    for group in (subs.FULL_MARKS, subs.ALWAYS_EQUAL):
        for name, answers in group.items():
            notebooks[name] = subs.make_submission(subs.RELEASE, answers)
    for student, pack in _packs(subs).items():
        notebooks[student] = subs.make_submission(
            subs.RELEASE, kit.pack_answers(pack, subs.SOLUTIONS)
        )

    def alone(mistake: str) -> nbformat.NotebookNode:
        return subs.make_submission(subs.RELEASE, subs.MISTAKES[mistake].answers)

    student, mistake, cell = subs.DELETED
    notebooks[student] = subs.without_cell(alone(mistake), cell)
    student, mistake, cells = subs.PASSED
    notebooks[student] = alone(mistake)
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
        # there); tests/course/test_release.py runs the hidden tests on CUDA where there is one.
        patch.setenv("CUDA_VISIBLE_DEVICES", "")
        yield


def _instructors_env() -> dict[str, str]:
    # Without pytest's PYTEST_CURRENT_TEST, as an instructor runs it: under pytest ipykernel
    # leaves what native code writes to file descriptor 2 uncaptured, and a test cell with
    # such output (a profiler's log line) scores 0 under nbgrader, on a real kernel only.
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def _nbgrader(course: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    env = {**_instructors_env(), **env}
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert result.returncode == 0, (
        f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    )
    return result


class GradedClasses:
    """Every unit's class, graded on first use and kept for the module, whatever order the
    tests come in: each unit autograded in a course folder of its own, side by side (one
    per core), the largest classes first. (Halves of each class side by side cost an
    nbgrader start and a feedback run more a unit, about 20 CPU s in all, for no gain:
    four classes already keep two cores busy.)"""

    def __init__(self, tmp_path_factory, root: Path):
        self.tmp_path_factory, self.root, self.done = tmp_path_factory, root, {}
        self.kernels: Path | None = None

    def get(self, unit: str) -> tuple[Path, dict]:
        if not self.done:
            from concurrent.futures import ThreadPoolExecutor

            classes = {u: _class_of_submissions(submissions(u)) for u in UNITS}
            largest_first = sorted(UNITS, key=lambda u: -len(classes[u]))
            # pytest makes its base folder on first use; two threads at once both would
            # (FileExistsError where this is a process's first test, as under pytest-xdist)
            folder = self.tmp_path_factory.mktemp("kernels")
            zygote = forked_kernels.Zygote(folder, _instructors_env())
            try:
                self.kernels = forked_kernels.kernel_dir(folder, zygote)
                with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                    courses = pool.map(
                        lambda u: self._grade(submissions(u), classes[u]), largest_first
                    )
                    for u, course in zip(largest_first, courses):
                        self.done[u] = (course, self._grades(submissions(u), course))
            finally:
                zygote.close()
        return self.done[unit]

    def _grade(self, subs, notebooks: dict) -> Path:
        """A course folder with the unit's assignment generated, its class autograded and
        its feedback generated."""
        course = self.tmp_path_factory.mktemp(f"course-{subs.ASSIGNMENT}")
        shutil.copy(self.root / "nbgrader_config.py", course)
        shutil.copytree(self.root / "source" / subs.ASSIGNMENT, course / "source" / subs.ASSIGNMENT)
        _nbgrader(course, "generate_assignment", subs.ASSIGNMENT, "--force")
        for student, nb in notebooks.items():
            folder = course / "submitted" / student / subs.ASSIGNMENT
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{subs.ASSIGNMENT}.ipynb")
        _nbgrader(course, "autograde", subs.ASSIGNMENT, JUPYTER_PATH=str(self.kernels))
        _nbgrader(course, "generate_feedback", subs.ASSIGNMENT)
        return course

    @staticmethod
    def _grades(subs, course: Path) -> dict[str, dict]:
        """student -> {"score": total, "max": max, "cells": {grade_id: auto_score}}."""
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


@pytest.fixture(scope="module")
def classes(tmp_path_factory, root, venv_on_path) -> GradedClasses:
    return GradedClasses(tmp_path_factory, root)


@pytest.fixture
def subs(unit):
    return submissions(unit)


@pytest.fixture
def course(classes, unit) -> Path:
    return classes.get(unit)[0]


@pytest.fixture
def grades(classes, unit) -> dict[str, dict]:
    return classes.get(unit)[1]


def _failed_cells(subs, grade: dict) -> set[str]:
    return {name for name, score in grade["cells"].items() if score != subs.POINTS[name]}


def _feedback_text(subs, course: Path, student: str) -> str:
    page = course / "feedback" / student / subs.ASSIGNMENT / f"{subs.ASSIGNMENT}.html"
    return html.unescape(page.read_text())


def _error_texts(subs, course: Path, student: str) -> dict[str, list[str]]:
    """test-cell grade_id (or the cell's index) -> the error texts its outputs hold."""
    nb = nbformat.read(
        course / "autograded" / student / subs.ASSIGNMENT / f"{subs.ASSIGNMENT}.ipynb", 4
    )
    errors: dict[str, list[str]] = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                key = cell.metadata.get("nbgrader", {}).get("grade_id", str(index))
                errors.setdefault(key, []).append(
                    "\n".join([output.get("evalue", ""), *output.get("traceback", [])])
                )
    return errors


# A message may repeat the value the learner typed ("adam_mb = 300.0: ..."), which can
# coincide with another question's answer; it must never show an expected value.
ECHO = re.compile(r" = (-?[\d.]+(?:e[-+]?\d+)?|'[^']*'):")


def test_every_submission_is_graded(grades, subs):
    assert set(grades) == set(_class_of_submissions(subs))


def test_nbgraders_kernels_were_forked_but_each_units_stock_pair(classes, course, subs):
    """Every notebook had a kernel of its own, forked from the zygote, but the solution and
    the unmodified release, which ipykernel's own launcher started as nbgrader does."""
    launches = (classes.kernels / forked_kernels.LAUNCHES).read_text().splitlines()
    mine = sorted(
        (how, Path(folder).parent.name)
        for how, folder in (line.split(" ", 1) for line in launches)
        if Path(folder).is_relative_to(course)
    )
    students = _class_of_submissions(subs)
    assert sorted(s for _, s in mine) == sorted(students)  # one kernel each
    assert {s for how, s in mine if how == "stock"} == set(forked_kernels.STOCK)


def test_solution_scores_full_marks(grades, subs):
    solution = grades["solution"]
    # Everything is autograded: no part waits for a person, so full marks are the whole total.
    assert solution["manual"] is False
    assert solution["max"] == subs.TOTAL == sum(subs.POINTS.values())
    assert solution["score"] == subs.expected_score(subs.SOLUTIONS)
    assert _failed_cells(subs, solution) == set()


def test_unmodified_release_scores_zero_on_every_part(grades, subs):
    release = grades["unmodified_release"]
    assert set(release["cells"]) == set(subs.POINTS)
    assert all(score == 0 for score in release["cells"].values()), release["cells"]
    assert release["score"] == subs.expected_score({}) == 0


def test_other_right_answers_earn_every_point(grades, subs, right):
    """For gpu_tensors, the seed's own rounded answers (0.79 MB, 0.48 ms, 0.98 ms); for the
    others, other right ways to write each answer."""
    assert _failed_cells(subs, grades[right]) == set()
    assert grades[right]["score"] == subs.TOTAL


def test_answers_that_equal_anything_earn_at_most_a_tenth(grades, subs, liar):
    """Plain nbgrader, no integrity review: the checks alone must hold."""
    earned = {cell: score for cell, score in grades[liar]["cells"].items() if score}
    assert grades[liar]["score"] <= subs.ALWAYS_EQUAL_MAX, earned


def test_mistake_scores_its_partial_score(grades, subs, mistake):
    """Its pack's submission loses exactly the cells of the pack's mistakes, its own among them."""
    student, pack = _pack_of(subs, mistake)
    assert set(subs.MISTAKES[mistake].fails) <= kit.pack_fails(pack)
    assert _failed_cells(subs, grades[student]) == kit.pack_fails(pack)
    lost = sum(subs.POINTS[cell] for cell in kit.pack_fails(pack))
    assert grades[student]["score"] == subs.TOTAL - lost < subs.TOTAL


def test_mistake_hint_appears_in_feedback(course, subs, mistake):
    """In the feedback page, and in the message of a cell this mistake fails (not only in
    another mistake's of its pack)."""
    student, _ = _pack_of(subs, mistake)
    expected = subs.MISTAKES[mistake]
    assert expected.hint in _feedback_text(subs, course, student)
    errors = _error_texts(subs, course, student)
    assert any(expected.hint in text for cell in expected.fails for text in errors[cell])


def test_failure_messages_never_show_an_answer(course, subs, mistake):
    """One error in each cell the mistake fails, and none in a cell its pack does not fail."""
    student, pack = _pack_of(subs, mistake)
    errors = _error_texts(subs, course, student)
    assert set(errors) == kit.pack_fails(pack), errors.keys()
    for cell in subs.MISTAKES[mistake].fails:
        assert len(errors[cell]) == 1, errors[cell]
        for text in errors[cell]:
            assert subs.answer_values_in(ECHO.sub(":", text)) == [], text
            # The message replaces the traceback, so no test source (and its expected values) shows.
            assert "Traceback" not in text and "check_close(" not in text, text


def test_deleting_a_test_cell_does_not_dodge_it(course, grades, subs):
    student, mistake, cell = subs.DELETED
    assert cell in grades[student]["cells"] and grades[student]["cells"][cell] == 0
    assert grades[student]["score"] == subs.MISTAKES[mistake].score
    assert subs.MISTAKES[mistake].hint in _feedback_text(subs, course, student)


def test_replacing_test_code_with_pass_does_not_dodge_it(course, grades, subs):
    student, mistake, cells = subs.PASSED
    assert all(grades[student]["cells"][cell] == 0 for cell in cells)
    assert grades[student]["score"] == subs.MISTAKES[mistake].score
    assert subs.MISTAKES[mistake].hint in _feedback_text(subs, course, student)
