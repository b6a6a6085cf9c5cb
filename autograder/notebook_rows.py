"""One notebook's rows of the gradebook, read at once for nbgrader's lookups cell by cell.

nbgrader's ``OverwriteCells`` and ``SaveAutoGrades`` look up one row for each cell
(``find_source_cell``, ``find_graded_cell``, ``find_grade``, ``find_comment``): a query of
two to six joins each, some 60 a submission in a worker and 30 in the coordinator, about a
tenth of the CPU a submission costs. Within ``one_read(gradebook, notebook, assignment,
student)`` those four methods of that one ``Gradebook`` answer from the notebook's rows,
read with one query for each kind of row the first time that kind is asked.

Contract: each lookup returns what nbgrader's own method returns, the same ORM object of
the same session, as long as nothing adds or removes those rows meanwhile (OverwriteCells
only reads; SaveAutoGrades changes the values of rows it found). The rows are matched as
nbgrader matches them, with the same joins and filters, a grade or task cell's grade by the
grade cell first, a comment by the solution cell first. A name the rows do not have, and
a lookup for another notebook, assignment or student, go to nbgrader's own method, which
raises ``MissingEntry`` as before. Nothing a student writes chooses a query: the names are
the cells' ``grade_id``, compared in Python.

Used by course-grade's ``SaveAutoGradesAtOnce`` (workers and coordinator), its
``OverwriteCellsFromOneRead`` (workers, swapped in by ``autograder.config``) and its
``GetGradesFromOneRead`` (each feedback page, swapped in by ``autograder.worker.feedback``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from nbgrader.api import (
    Assignment,
    Comment,
    Grade,
    Gradebook,
    GradeCell,
    Notebook,
    SolutionCell,
    SourceCell,
    Student,
    SubmittedAssignment,
    SubmittedNotebook,
    TaskCell,
)
from nbgrader.preprocessors import GetGrades, OverwriteCells


def _cells(db, kind, notebook: str, assignment: str) -> dict:
    rows = (
        db.query(kind)
        .join(Notebook, Notebook.id == kind.notebook_id)
        .join(Assignment, Assignment.id == Notebook.assignment_id)
        .filter(Notebook.name == notebook, Assignment.name == assignment)
    )
    return {cell.name: cell for cell in rows}


def _submitted(db, row, kind, notebook: str, assignment: str, student: str) -> dict:
    rows = (
        db.query(kind.name, row)
        .join(kind, kind.id == row.cell_id)
        .join(SubmittedNotebook, SubmittedNotebook.id == row.notebook_id)
        .join(Notebook, Notebook.id == SubmittedNotebook.notebook_id)
        .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
        .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
        .join(Student, Student.id == SubmittedAssignment.student_id)
        .filter(Notebook.name == notebook, Assignment.name == assignment, Student.id == student)
    )
    return dict(rows.all())


# What each lookup reads, in nbgrader's order of preference: the later kind wins a name.
def _reads(db, notebook: str, assignment: str, student: str | None) -> dict[str, Callable]:
    return {
        "find_source_cell": lambda: _cells(db, SourceCell, notebook, assignment),
        "find_graded_cell": lambda: {
            **_cells(db, TaskCell, notebook, assignment),
            **_cells(db, GradeCell, notebook, assignment),
        },
        "find_grade": lambda: {
            **_submitted(db, Grade, TaskCell, notebook, assignment, student),
            **_submitted(db, Grade, GradeCell, notebook, assignment, student),
        },
        "find_comment": lambda: {
            **_submitted(db, Comment, TaskCell, notebook, assignment, student),
            **_submitted(db, Comment, SolutionCell, notebook, assignment, student),
        },
    }


_OF_A_SUBMISSION = ("find_grade", "find_comment")


@contextlib.contextmanager
def one_read(
    gradebook: Gradebook, notebook: str, assignment: str, student: str | None = None
) -> Iterator[None]:
    """Within: ``gradebook``'s four lookups answer for this notebook from rows read once
    (the two of a submission's rows only where ``student`` is given)."""
    reads = _reads(gradebook.db, notebook, assignment, student)
    if student is None:
        for method in _OF_A_SUBMISSION:
            del reads[method]
    for method, read in reads.items():
        # The lookups of a submission's rows name the student too; those of cells do not.
        where = (
            (notebook, assignment, student)
            if method in _OF_A_SUBMISSION
            else (notebook, assignment)
        )
        setattr(gradebook, method, _answering(getattr(gradebook, method), read, where))
    try:
        yield
    finally:
        for method in reads:
            delattr(gradebook, method)  # the class's own method again


def _answering(own: Callable, read: Callable, mine: tuple) -> Callable:
    rows: dict | None = None

    def find(name, *where, **named):
        nonlocal rows
        if not named and where == mine:
            if rows is None:
                rows = read()
            found = rows.get(name)
            if found is not None:
                return found
        return own(name, *where, **named)

    return find


class OverwriteCellsFromOneRead(OverwriteCells):
    """nbgrader's ``OverwriteCells``, its source and graded cells read once a notebook
    (``one_read``); its ``preprocess``, as nbgrader's, with the read around it."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook, one_read(self.gradebook, self.notebook_id, self.assignment_id):
            nb, resources = super(OverwriteCells, self).preprocess(nb, resources)
            if self.add_missing_cells:
                nb, resources = self.add_missing_grade_cells(nb, resources)
                nb, resources = self.add_missing_task_cells(nb, resources)
        return nb, resources


class GetGradesFromOneRead(GetGrades):
    """nbgrader's ``GetGrades`` (a feedback page's scores and comments), its grades and
    comments read once a notebook (``one_read``) rather than in some 20 lookups a page.
    Its ``preprocess``, as nbgrader's, with the read around its cells."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.student_id = resources["nbgrader"]["student"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            with one_read(self.gradebook, self.notebook_id, self.assignment_id, self.student_id):
                nb, resources = super(GetGrades, self).preprocess(nb, resources)
            notebook = self.gradebook.find_submission_notebook(
                self.notebook_id, self.assignment_id, self.student_id
            )
            late_penalty = notebook.late_submission_penalty
            if late_penalty is None:
                late_penalty = 0
            else:
                self.log.warning(f"Late submission penalty: {late_penalty}")
            resources["nbgrader"]["score"] = notebook.score - late_penalty
            resources["nbgrader"]["max_score"] = notebook.max_score
            resources["nbgrader"]["late_penalty"] = late_penalty
        return nb, resources
