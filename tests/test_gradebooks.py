"""Grading processes share one SQLAlchemy engine per gradebook (autograder.gradebooks):
nbgrader's Gradebook still reads and writes as before, nested and one after another."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from nbgrader.api import Gradebook

from autograder import gradebooks


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
