"""nbgrader's SaveAutoGrades, each notebook in one transaction.

Contract: the same rows as nbgrader's own ``SaveAutoGrades`` (its ``_add_score`` and
``_add_comment`` run unchanged, in the same order), committed once when the notebook's
last cell is saved, or not at all. nbgrader commits after every graded cell; each commit
expires every object the session holds (SQLAlchemy's ``expire_on_commit``), so the next
cell loads the submission's rows again, and a grader that dies between two cells leaves a
notebook half saved in the gradebook. Here nbgrader's commit after a cell is a flush (the
rows are written inside the transaction, as autoflush would before the next query), and
the transaction is committed after the last cell: a failure on the way rolls it back, and
the notebook keeps the grades it had. Its rows are read once a notebook, not once a cell
(``autograder.notebook_rows``).

Used by course-grade's workers (their private gradebook, through
``Autograde.autograde_preprocessors``) and by the coordinator (the course's gradebook).
Plain nbgrader, run by the instructor with the course's own config, keeps nbgrader's class.
"""

from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades

from autograder.notebook_rows import one_read


class SaveAutoGradesAtOnce(SaveAutoGrades):
    """``SaveAutoGrades`` with one commit a notebook."""

    def preprocess(self, nb, resources):
        ids = resources["nbgrader"]
        self.notebook_id = ids["notebook"]
        self.assignment_id = ids["assignment"]
        self.student_id = ids["student"]
        self.db_url = ids["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            session = self.gradebook.db
            # nbgrader's own per-cell commit (the scoped session's method, shadowed on this
            # one session only, for the cells of this notebook).
            session.commit = session.flush
            try:
                with one_read(
                    self.gradebook, self.notebook_id, self.assignment_id, self.student_id
                ):
                    nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)
            finally:
                del session.commit
            session.commit()
        return nb, resources
