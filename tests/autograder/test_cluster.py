"""Grading beyond one machine: a real Dask cluster on loopback and a real PostgreSQL
gradebook give exactly the local run's scores and fates; a worker killed mid-batch loses
no grade and counts none twice; a lost scheduler stops the run with a clear message, and
the next run resumes where it stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests.class_fixture import ASSIGNMENT, build_course, full_class
from tests.servers import dask_cluster, has_postgres, postgres

pytestmark = [
    pytest.mark.slow,
    pytest.mark.first,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
    pytest.mark.skipif(
        not has_postgres(), reason="needs Debian's postgresql (scripts/setup --system installs it)"
    ),
]
CLI = str(Path(sys.executable).parent / "course-grade")
# A small class: honest work, a blank, a mistake, a crash, and a trick.
SMALL = ("ada", "blank", "mistake-mib", "exits-os", "trick-forges-bridge-replies")


def make_course(tmp: Path, db_url: str | None = None) -> tuple[Path, Path]:
    """A course with the small class in a folder to import; PostgreSQL when ``db_url``."""
    tmp.mkdir(parents=True, exist_ok=True)
    extra = f"\nc.CourseDirectory.db_url = {db_url!r}\n" if db_url else ""
    course = build_course(tmp, extra_config=extra)
    inbox = tmp / "inbox"
    inbox.mkdir()
    for case in full_class():
        if case.student in SMALL:
            nbformat.write(case.nb, inbox / f"{case.student}.ipynb")
    return course, inbox


def course_grade(course: Path, *args: str, **kw):
    return subprocess.run(
        [CLI, ASSIGNMENT, "--course", str(course), "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=900,
        **kw,
    )


def start_and_await_a_grade(course: Path, inbox: Path, address: str):
    """Start course-grade on the cluster; return once it has recorded its first grade."""
    run = subprocess.Popen(
        [
            CLI,
            ASSIGNMENT,
            "--course",
            str(course),
            "--no-progress",
            "--folder",
            str(inbox),
            "--scheduler",
            address,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(ledger.glob("*.json"))) < 1:
        time.sleep(0.2)
    return run, ledger


def outcomes(course: Path) -> dict[str, tuple]:
    rows = json.loads((course / "reports" / ASSIGNMENT / "report.json").read_text())
    return {r["student_id"]: (r["score"], r["fate"]) for r in rows}


@pytest.fixture(scope="module")
def local():
    """The reference: what this machine's pool gives each student of the small class, its
    expected score and fate (test_pipeline's test_every_score_and_fate checks that the local
    pool gives every case of the whole class exactly those, on SQLite)."""
    return {
        c.student: (c.expected_score, c.expected_fate) for c in full_class() if c.student in SMALL
    }


def test_a_cluster_grades_into_postgresql_exactly_like_the_local_run(tmp_path, local):
    """One worker with two threads (each job has its own kernels, uids, template and
    record: issue 20) grades exactly like the local pool."""
    with postgres(tmp_path) as url, dask_cluster(1, tmp_path, nthreads=2) as (address, workers, _):
        course, inbox = make_course(tmp_path / "class", url)
        assert not (course / "gradebook.db").exists()  # the gradebook is PostgreSQL's
        result = course_grade(course, "--folder", str(inbox), "--scheduler", address)
        assert result.returncode == 0, result.stderr[-3000:]
        assert outcomes(course) == local
        assert set(local) == set(SMALL)
        # nbgrader's own commands and formgrader's API work on the PostgreSQL gradebook.
        exported = subprocess.run(
            [
                str(Path(sys.executable).parent / "nbgrader"),
                "export",
                "--to",
                str(tmp_path / "export.csv"),
            ],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:" + os.environ["PATH"]},
        )
        assert exported.returncode == 0, exported.stderr[-2000:]
        assert (tmp_path / "export.csv").read_text().count(ASSIGNMENT) == len(SMALL)
        from nbgrader.apps.api import NbGraderAPI
        from nbgrader.auth import Authenticator
        from nbgrader.coursedir import CourseDirectory

        from autograder.config import grading_config

        config = grading_config(course)
        api = NbGraderAPI(
            CourseDirectory(config=config), Authenticator(config=config), config=config
        )
        scores = {s["student"]: s["score"] for s in api.get_submissions(ASSIGNMENT)}
        assert scores == {s: score for s, (score, _) in local.items()}
        # The workers kept nothing in their own folders (each grades in a scratch folder
        # it removes) and took nothing from the course's but the bytes they were sent.
        assert list((tmp_path / "worker-0").iterdir()) == []


def test_a_worker_killed_mid_batch_loses_no_grade_and_counts_none_twice(tmp_path, local):
    with postgres(tmp_path) as url, dask_cluster(2, tmp_path) as (address, workers, _):
        course, inbox = make_course(tmp_path / "class", url)
        run, ledger = start_and_await_a_grade(course, inbox, address)
        os.killpg(workers["worker-0"].pid, signal.SIGKILL)  # with its kernels
        out, err = run.communicate(timeout=900)
        assert run.returncode == 0, err[-3000:]
        assert outcomes(course) == local
        from nbgrader.api import Gradebook

        from autograder.config import grading_config

        with Gradebook(grading_config(course).CourseDirectory.db_url) as gb:
            assert len(gb.find_assignment(ASSIGNMENT).submissions) == len(SMALL)


def test_a_lost_scheduler_stops_the_run_and_the_next_run_resumes(tmp_path, local):
    course, inbox = make_course(tmp_path / "class")
    # One worker is enough to lose its scheduler (each worker starts two kernel templates).
    with dask_cluster(1, _mk(tmp_path / "a")) as (address, _, scheduler):
        run, ledger = start_and_await_a_grade(course, inbox, address)
        os.killpg(scheduler.pid, signal.SIGKILL)
        out, err = run.communicate(timeout=600)
    assert run.returncode == 2, (run.returncode, err[-2000:])
    assert "lost the Dask scheduler" in err and "run the same command again" in err
    done = {p.stem for p in ledger.glob("*.json")}
    assert 1 <= len(done) < len(SMALL)
    with dask_cluster(1, _mk(tmp_path / "b")) as (address, _, _):
        again = course_grade(course, "--scheduler", address)
    assert again.returncode == 0, again.stderr[-2000:]
    rows = json.loads((course / "reports" / ASSIGNMENT / "report.json").read_text())
    assert {r["student_id"] for r in rows if r["this_run"] == "graded"} == set(SMALL) - done
    assert outcomes(course) == local


def _mk(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
