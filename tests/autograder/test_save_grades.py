"""Each notebook's grades saved in one transaction (autograder.save_grades): the rows
nbgrader's own SaveAutoGrades writes, one commit, and none of them when a cell fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import SaveAutoGrades
from sqlalchemy import event
from sqlalchemy.engine import Engine

from autograder.config import grading_config
from autograder.save_grades import SaveAutoGradesAtOnce


def _cell(grade_id: str, points: int | None = None, failed: bool = False):
    """A test cell worth ``points`` (its output an error where ``failed``), or with no
    points an answer cell."""
    test = points is not None
    cell = new_code_cell("check()" if test else "x = 1")
    cell.metadata.nbgrader = {"grade": test, "solution": not test, "locked": test}
    cell.metadata.nbgrader.update(grade_id=grade_id, **({"points": points} if test else {}))
    if failed:
        cell.outputs = [new_output("error", ename="AssertionError", evalue="no", traceback=[])]
    return cell


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A gradebook with one notebook of two test cells and an answer cell, and ada's
    submission of it: made once (nbgrader runs alembic as it makes one), copied per test."""
    path = tmp_path_factory.mktemp("made") / "gradebook.db"
    with pytest.MonkeyPatch.context() as patch:
        # nbgrader runs `alembic` by name when it makes a gradebook: this environment's.
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        with Gradebook(f"sqlite:///{path}") as gb:
            gb.add_assignment("a1")
            gb.add_notebook("nb", "a1")
            gb.add_grade_cell("t1", "nb", "a1", max_score=2, cell_type="code")
            gb.add_grade_cell("t2", "nb", "a1", max_score=3, cell_type="code")
            gb.add_solution_cell("s1", "nb", "a1")
            gb.add_student("ada")
            gb.add_submission("a1", "ada")
    return path


def _copy(made: Path, folder: Path) -> str:
    (folder / made.name).write_bytes(made.read_bytes())
    return f"sqlite:///{folder / made.name}"


@pytest.fixture
def url(made, tmp_path) -> str:
    return _copy(made, tmp_path)


def _notebook(*extra) -> nbformat.NotebookNode:
    return new_notebook(cells=[_cell("s1"), _cell("t1", 2, failed=True), _cell("t2", 3), *extra])


def _save(preprocessor, url: str, nb) -> int:
    """Run a SaveAutoGrades on ``nb`` as ada's; how many commits reached the database."""
    commits = []

    def count(connection):
        commits.append(connection)

    event.listen(Engine, "commit", count)
    try:
        resources = {
            "nbgrader": {"notebook": "nb", "assignment": "a1", "student": "ada", "db_url": url}
        }
        preprocessor().preprocess(nb, resources)
    finally:
        event.remove(Engine, "commit", count)
    return len(commits)


def _rows(url: str) -> dict:
    with Gradebook(url) as gb:
        grades = {
            g: (
                (row := gb.find_grade(g, "nb", "a1", "ada")).auto_score,
                row.needs_manual_grade,
            )
            for g in ("t1", "t2")
        }
        comment = gb.find_comment("s1", "nb", "a1", "ada").auto_comment
        return {"grades": grades, "comment": comment}


def test_the_rows_are_nbgraders_own_in_one_commit(url, made, tmp_path):
    (tmp_path / "other").mkdir()
    other = _copy(made, tmp_path / "other")
    commits = _save(SaveAutoGradesAtOnce, url, _notebook())
    nbgraders = _save(SaveAutoGrades, other, _notebook())
    assert _rows(url) == _rows(other)
    assert _rows(url)["grades"] == {"t1": (0, False), "t2": (3, False)}
    # nbgrader's commits once for each of the three cells, ours once for the notebook (the
    # rest, the same in both, are the Gradebook's own as it opens).
    assert nbgraders - commits == 3 - 1


def test_a_notebook_that_fails_half_way_keeps_the_grades_it_had(url):
    before = _rows(url)
    unknown = _cell("not_in_the_gradebook", 1)
    with pytest.raises(MissingEntry):
        _save(SaveAutoGradesAtOnce, url, _notebook(unknown))
    assert _rows(url) == before  # t1 and t2, saved before the failing cell, rolled back


@pytest.mark.parametrize(
    "trait, ours, nbgraders",
    [
        (
            "autograde_preprocessors",
            "autograder.save_grades.SaveAutoGradesAtOnce",
            "SaveAutoGrades",
        ),
        (
            "autograde_preprocessors",
            "autograder.late_penalties.CheckedLatePenalties",
            "AssignLatePenalties",
        ),
        (
            "sanitize_preprocessors",
            "autograder.notebook_rows.OverwriteCellsFromOneRead",
            "OverwriteCells",
        ),
    ],
)
def test_course_grade_swaps_in_its_own_for_nbgraders(tmp_path, trait, ours, nbgraders):
    """In the workers' autograde (the config's preprocessors) and, for the grades, in the
    coordinator's save."""
    import inspect

    from autograder.coordinator import grade

    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    names = [
        p if isinstance(p, str) else f"{p.__module__}.{p.__name__}"
        for p in grading_config(tmp_path).Autograde[trait]
    ]
    assert ours in names
    assert not [n for n in names if n.rsplit(".", 1)[-1] == nbgraders]
    assert "(SaveAutoGradesAtOnce, CheckedLatePenalties)" in inspect.getsource(grade._save_grades)
