"""What a grading process sets up once (autograder.worker.gradebooks, worker folders, imports):
one SQLAlchemy engine per gradebook, through which nbgrader's Gradebook still reads and
writes as before; one schema validator for cell metadata, with jsonschema's verdicts;
a job folder per worker thread; and no IRI grammar built at import."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.worker import gradebooks


def test_gradebooks_of_one_url_share_an_engine_and_see_each_others_writes(tmp_path, monkeypatch):
    # nbgrader runs `alembic` by name when it makes a gradebook: this environment's.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    gradebooks.share_engines()
    gradebooks.share_engines()  # idempotent: no wrapper around the wrapper
    url = f"sqlite:///{tmp_path}/gradebook.db"
    with Gradebook(url) as outer:
        outer.add_assignment("a1")
        with Gradebook(url) as inner:  # as nbgrader's preprocessors do inside a step
            assert inner.engine is outer.engine
            inner.add_student("ada")
        outer.db.expire_all()
        assert [s.id for s in outer.students] == ["ada"]  # usable after the inner closed
        outer.add_student("bob")
    with Gradebook(url) as again:
        assert sorted(s.id for s in again.students) == ["ada", "bob"]
        assert again.find_assignment("a1").name == "a1"
    with Gradebook(f"sqlite:///{tmp_path}/other.db") as other:
        assert other.engine is not again.engine and not list(other.students)


def test_only_a_workers_scratch_gradebook_gives_up_durability(tmp_path, monkeypatch):
    """A worker's private gradebook is thrown away: no sync, the journal in memory. The
    course's keeps SQLite's defaults (FULL sync, a journal file)."""
    from sqlalchemy import text

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    gradebooks.share_engines()
    scratch, course = f"sqlite:///{tmp_path}/private.db", f"sqlite:///{tmp_path}/course.db"
    gradebooks.scratch(scratch)
    found = {}
    for url in (scratch, course):
        with Gradebook(url) as gb:
            gb.add_student("ada")
            found[url] = [
                gb.db.execute(text(f"PRAGMA {name}")).scalar()
                for name in ("synchronous", "journal_mode")
            ]
    assert found == {scratch: [0, "memory"], course: [2, "delete"]}


def test_a_gradebook_emptied_and_made_again_at_its_url_is_read_afresh(tmp_path, monkeypatch):
    """A worker grades each job in the same folder: the engine outlives the file."""
    import shutil

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    gradebooks.share_engines()
    folder = tmp_path / "job"
    url = f"sqlite:///{folder}/gradebook.db"
    import sqlite3

    for student in ("ada", "bob"):
        folder.mkdir()
        with Gradebook(url) as gb:
            gb.add_student(student)
            assert [s.id for s in gb.students] == [student]
        with sqlite3.connect(folder / "gradebook.db") as db:  # the file now at that path
            assert db.execute("SELECT id FROM student").fetchall() == [(student,)]
        shutil.rmtree(folder)


def test_cell_metadata_is_checked_as_jsonschema_checks_it(monkeypatch):
    """One validator per schema (the schema itself is checked once, not per cell), the
    same verdict and message as jsonschema.validate."""
    import jsonschema
    import pytest
    from nbformat.v4 import new_code_cell
    from nbgrader.nbgraderformat import MetadataValidator

    gradebooks.share_validators()
    gradebooks.share_validators()  # idempotent
    validator = MetadataValidator()
    checks = []
    kind = jsonschema.validators.validator_for(validator.schema)
    check = kind.check_schema
    monkeypatch.setattr(
        kind,
        "check_schema",
        classmethod(lambda cls, schema, **kw: checks.append(1) or check(schema, **kw)),
    )
    good = {
        "schema_version": 3,
        "grade": True,
        "solution": False,
        "locked": True,
        "task": False,
        "grade_id": "q1",
        "points": 2,
    }
    for _ in range(20):
        validator.validate_cell(new_code_cell(metadata={"nbgrader": good}))
    assert len(checks) <= 1
    for bad in (
        {**good, "points": "many"},
        {**good, "grade": "yes"},
        {**good, "hidden": "extra key"},
        {**good, "grade_id": "no spaces allowed"},
    ):
        with pytest.raises(jsonschema.ValidationError) as ours:
            validator.validate_cell(new_code_cell(metadata={"nbgrader": bad}))
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(bad, validator.schema)
        assert ours.value.message == theirs.value.message


def test_no_process_that_reads_notebooks_builds_the_iri_grammar_and_notebooks_still_validate():
    """jsonschema from 4.24 imports rfc3987_syntax with nbformat (its format-nongpl extra,
    which jupyter_events asks for, installs it), building 38 grammars: 1.8-3 CPU s in every
    process that reads a notebook (each nbgrader command, course-grade, each worker, the
    Jupyter server). The pin in requirements/constraints.txt keeps it out of them all, a
    grading worker included; nbformat still refuses a notebook that breaks its schema."""
    import subprocess

    for first in ("", "import autograder.worker.worker; "):
        code = (
            f"import sys; {first}import nbformat; from nbformat.v4 import new_notebook; "
            "nb = new_notebook(); nbformat.validate(nb); nb.cells.append({'cell_type': 'code'}); "
            "bad = not nbformat.validator.isvalid(nb); "
            "print('rfc3987_syntax' not in sys.modules, bad)"
        )
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert run.stdout.split() == ["True", "True"], (first, run.stdout, run.stderr[-2000:])


def test_each_worker_thread_grades_in_a_folder_of_its_own_and_keeps_it():
    """A worker's jobs reuse one folder (one gradebook URL); a Dask worker with several
    threads runs jobs at once, and two jobs never share a folder."""
    import shutil
    import threading

    from autograder.worker import worker

    first = worker._scratch()
    try:
        assert first.is_dir() and not any(first.iterdir())
        shutil.rmtree(first)  # as grade_job does after a job
        assert worker._scratch() == first
        other = []
        thread = threading.Thread(target=lambda: other.append(worker._scratch()))
        thread.start()
        thread.join()
        assert other[0] != first and other[0].is_dir()
        shutil.rmtree(other[0])
        (first / "left-behind").write_text("not emptied")  # a job whose folder stayed
        fresh = worker._scratch()
        assert fresh != first and not any(fresh.iterdir())
        shutil.rmtree(fresh)
    finally:
        shutil.rmtree(first, ignore_errors=True)
