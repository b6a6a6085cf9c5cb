"""nbgrader's lookups cell by cell answered from one notebook's rows read at once
(``autograder.notebook_rows``): the same rows as nbgrader's own queries, in fewer queries,
and the same notebook out of OverwriteCells."""

from __future__ import annotations

import copy
import logging
import os
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import GetGrades, OverwriteCells
from nbgrader.utils import compute_checksum
from sqlalchemy import event
from sqlalchemy.engine import Engine

from autograder.notebook_rows import GetGradesFromOneRead, OverwriteCellsFromOneRead, one_read

NOTEBOOKS = ("nb", "other")
STUDENTS = ("ada", "bob")


def _cells() -> list:
    """The source notebook: an answer, two tests, a task and a plain markdown cell."""
    answer = new_code_cell("x = 1")
    answer.metadata.nbgrader = {"grade_id": "s1", "solution": True, "grade": False, "locked": False}
    cells = [answer]
    for name, points in (("t1", 2), ("t2", 3)):
        test = new_code_cell(f"assert x == {points}")
        test.metadata.nbgrader = {
            "grade_id": name,
            "grade": True,
            "solution": False,
            "locked": True,
            "points": points,
        }
        cells.append(test)
    task = new_markdown_cell("Describe the race.")
    task.metadata.nbgrader = {
        "grade_id": "task1",
        "task": True,
        "grade": False,
        "solution": False,
        "locked": True,
        "points": 1,
    }
    cells.append(task)
    for cell in cells:
        cell.metadata.nbgrader["checksum"] = compute_checksum(cell)
        cell.metadata.nbgrader["schema_version"] = 3
    return cells


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """Two notebooks of those cells in one assignment, and two students' submissions."""
    path = tmp_path_factory.mktemp("made") / "gradebook.db"
    with pytest.MonkeyPatch.context() as patch:
        # nbgrader runs `alembic` by name when it makes a gradebook: this environment's.
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        with Gradebook(f"sqlite:///{path}") as gb:
            gb.add_assignment("a1")
            for notebook in NOTEBOOKS:
                gb.add_notebook(notebook, "a1")
                for cell in _cells():
                    meta = cell.metadata.nbgrader
                    if meta.get("grade"):
                        gb.add_grade_cell(
                            meta["grade_id"],
                            notebook,
                            "a1",
                            max_score=meta["points"],
                            cell_type="code",
                        )
                    if meta.get("solution"):
                        gb.add_solution_cell(meta["grade_id"], notebook, "a1")
                    if meta.get("task"):
                        gb.add_task_cell(
                            meta["grade_id"],
                            notebook,
                            "a1",
                            max_score=meta["points"],
                            cell_type="markdown",
                        )
                    gb.add_source_cell(
                        meta["grade_id"],
                        notebook,
                        "a1",
                        cell_type=cell.cell_type,
                        locked=meta["locked"],
                        source=cell.source,
                        checksum=meta["checksum"],
                    )
            for student in STUDENTS:
                gb.add_student(student)
                gb.add_submission("a1", student)
    return path


@pytest.fixture
def url(made, tmp_path) -> str:
    (tmp_path / made.name).write_bytes(made.read_bytes())
    return f"sqlite:///{tmp_path / made.name}"


class Queries:
    """Counts the SELECTs that reach the database."""

    def __enter__(self):
        self.count = 0
        event.listen(Engine, "before_cursor_execute", self._seen)
        return self

    def _seen(self, conn, cursor, statement, *args):
        self.count += statement.lstrip().upper().startswith("SELECT")

    def __exit__(self, *exc):
        event.remove(Engine, "before_cursor_execute", self._seen)


LOOKUPS = [
    ("find_source_cell", ("s1", "t1", "t2", "task1", "nope"), False),
    ("find_graded_cell", ("t1", "t2", "task1", "s1", "nope"), False),
    ("find_grade", ("t1", "t2", "task1", "s1", "nope"), True),
    ("find_comment", ("s1", "task1", "t1", "nope"), True),
]


def _answers(gb, method: str, names, notebook: str, student: str | None):
    """What each lookup gives: the row, or the MissingEntry it raises."""
    out = {}
    for name in names:
        where = (notebook, "a1", student) if student else (notebook, "a1")
        try:
            out[name] = getattr(gb, method)(name, *where)
        except MissingEntry as exc:
            out[name] = f"MissingEntry: {exc}"
    return out


@pytest.mark.parametrize("method, names, of_a_submission", LOOKUPS)
def test_each_lookup_gives_nbgraders_own_row_for_every_notebook_and_student(
    url, method, names, of_a_submission
):
    with Gradebook(url) as gb:
        students = STUDENTS if of_a_submission else (None,)
        keys = [(n, s) for n in NOTEBOOKS for s in students]
        own = {key: _answers(gb, method, names, *key) for key in keys}
        for notebook, student in keys:  # each one's read: every other key keeps its own rows
            with one_read(gb, notebook, "a1", student):
                read = {key: _answers(gb, method, names, *key) for key in keys}
            assert read == own, (notebook, student)
            for key, rows in own.items():  # the very same objects of the session
                for name, row in rows.items():
                    assert isinstance(row, str) or read[key][name] is row, (key, name)
        after = {key: _answers(gb, method, names, *key) for key in keys}
    assert after == own
    assert any(not isinstance(r, str) for rows in own.values() for r in rows.values())


def test_a_notebooks_lookups_cost_one_read_of_each_kind(url):
    with Gradebook(url) as gb:
        with Queries() as nbgraders:
            for method, names, of_a_submission in LOOKUPS:
                _answers(gb, method, names[:-1], "nb", "ada" if of_a_submission else None)
        gb.db.expire_all()
        with Queries() as ours, one_read(gb, "nb", "a1", "ada"):
            for method, names, of_a_submission in LOOKUPS:
                _answers(gb, method, names[:-1], "nb", "ada" if of_a_submission else None)
    # nbgrader: a query for each cell, two where the first kind of cell does not match.
    assert nbgraders.count >= 15
    # ours: one for source cells, two for graded cells (grade, task), two each for grades
    # and comments; a cell of the other kind falls back to nbgrader's (s1 as a graded
    # cell and a grade, t1 as a comment: the MissingEntry nbgrader raises).
    assert ours.count <= 7 + 3 * 2


def _tampered():
    """A submission that changed what OverwriteCells puts back: a test's points and source,
    a locked task's text, and a cell the gradebook does not know."""
    cells = _cells()
    cells[1].metadata.nbgrader["points"] = 20
    cells[2].source = "pass"
    cells[3].source = "my own instructions"
    stranger = new_code_cell("y = 2")
    stranger.metadata.nbgrader = {"grade_id": "stranger", "grade": False, "solution": True}
    return new_notebook(cells=[*cells, stranger])


def test_overwrite_cells_gives_nbgraders_notebook_and_warnings(url, caplog):
    resources = {"nbgrader": {"notebook": "nb", "assignment": "a1", "db_url": url}}
    outs, tampered = {}, _tampered()
    for kind in (OverwriteCells, OverwriteCellsFromOneRead):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            nb, _ = kind().preprocess(copy.deepcopy(tampered), copy.deepcopy(resources))
        outs[kind] = (nb, [r.getMessage() for r in caplog.records])
    (theirs, their_words), (ours, our_words) = outs.values()
    assert ours == theirs and our_words == their_words
    assert (
        ours.cells[1].metadata.nbgrader["points"] == 2 and ours.cells[2].source == "assert x == 3"
    )
    assert any("does not exist" in w for w in our_words)


def test_get_grades_gives_nbgraders_page_data_from_one_read(url):
    """A feedback page's scores and comments (GetGrades): the same notebook and resources as
    nbgrader's, for each student, a late penalty included, in fewer queries."""
    with Gradebook(url) as gb:
        for student, points in (("ada", (2, 0)), ("bob", (1, 3))):
            for name, score in zip(("t1", "t2"), points):
                gb.find_grade(name, "nb", "a1", student).auto_score = score
            gb.find_comment("s1", "nb", "a1", student).manual_comment = f"well done, {student}"
        gb.find_submission_notebook("nb", "a1", "bob").late_submission_penalty = 1.5
        gb.db.commit()
    for student in STUDENTS:
        resources = {
            "nbgrader": {"notebook": "nb", "assignment": "a1", "student": student, "db_url": url}
        }
        outs, page = {}, new_notebook(cells=_cells())
        for kind in (GetGrades, GetGradesFromOneRead):
            with Queries() as queries:
                nb, res = kind().preprocess(copy.deepcopy(page), copy.deepcopy(resources))
            outs[kind] = (nb, res, queries.count)
        (theirs, their_res, their_queries), (ours, our_res, our_queries) = outs.values()
        assert ours == theirs and our_res == their_res
        assert our_queries < their_queries, (our_queries, their_queries)
        meta = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader for c in ours.cells}
        assert meta["s1"]["comment"] == f"well done, {student}"
        assert (meta["t1"]["score"], meta["t2"]["score"]) == (
            (2, 0) if student == "ada" else (1, 3)
        )
    assert our_res["nbgrader"]["late_penalty"] == 1.5 and our_res["nbgrader"]["score"] == 2.5
