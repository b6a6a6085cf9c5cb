"""course-grade on a whole class: scores, fates, nothing touched, feedback, re-runs."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder import importers
from tests.class_fixture import (ABUSE_SCORE, ASSIGNMENT, NOTEBOOK, abuse_cases, build_course,
                                 full_class, honest_cases, place_class)
from tests.submissions import MISTAKES, RELEASE, SOLUTIONS, SOURCE, TOTAL, make_submission

pytestmark = pytest.mark.slow
CLI = str(Path(sys.executable).parent / "course-grade")
SOURCE_TABLES = ("course", "assignment", "notebook", "base_cell", "grade_cells",
                 "solution_cells", "task_cells", "source_cell")


def course_grade(course: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, ASSIGNMENT, "--course", str(course), "--no-progress", *args],
                          capture_output=True, text=True, timeout=900, **kw)


def tree_hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def source_rows(course: Path) -> dict:
    with sqlite3.connect(course / "gradebook.db") as db:
        return {t: sorted(map(repr, db.execute(f"SELECT * FROM {t}"))) for t in SOURCE_TABLES}


def report(course: Path) -> dict[str, dict]:
    rows = json.loads((course / "reports" / ASSIGNMENT / "report.json").read_text())
    return {r["student_id"]: r for r in rows}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    course = build_course(tmp)
    cases = full_class()
    inputs = place_class(course, tmp, cases)
    importers.import_exchange(course, ASSIGNMENT)
    importers.record_problems(course, ASSIGNMENT,
                              importers.import_zip(course, ASSIGNMENT, inputs["zip"]))
    before = {"source": tree_hashes(course / "source"), "release": tree_hashes(course / "release"),
              "rows": source_rows(course), "config": tree_hashes(course)["nbgrader_config.py"]}
    # The folder import happens in the same command that grades.
    result = course_grade(course, "--folder", str(inputs["folder"]), "-j", "2")
    before["submitted"] = tree_hashes(course / "submitted")
    return course, cases, before, result


def test_batch_completes_with_a_fate_for_every_submission(graded):
    course, cases, _, result = graded
    assert result.returncode == 0, result.stderr[-3000:]
    assert set(report(course)) == {c.student for c in cases}
    assert len(cases) >= 25
    assert (course / "grades.csv").read_text().count(ASSIGNMENT) >= len(cases) - 3


def test_every_score_and_fate(graded):
    course, cases, _, _ = graded
    outcomes = report(course)
    wrong = []
    for case in cases:
        got = outcomes[case.student]
        if got["score"] != case.expected_score or got["fate"] != case.expected_fate:
            wrong.append((case.student, case.expected_score, case.expected_fate,
                          got["score"], got["fate"], got["details"] + got["flags"]))
        if case.expected_flag and not any(case.expected_flag in f for f in got["flags"]):
            wrong.append((case.student, "flag", case.expected_flag, got["flags"]))
    assert not wrong


def test_hostile_submissions_gain_nothing(graded):
    course, cases, _, _ = graded
    honest = {c.student for c in honest_cases()}
    outcomes = report(course)
    for case in cases:
        if case.student not in honest and case.expected_score is not None:
            assert outcomes[case.student]["score"] <= case.expected_score < TOTAL


def test_nothing_but_grade_rows_changes(graded):
    course, _, before, _ = graded
    assert tree_hashes(course / "source") == before["source"]
    assert tree_hashes(course / "release") == before["release"]
    assert tree_hashes(course)["nbgrader_config.py"] == before["config"]
    assert source_rows(course) == before["rows"]
    with sqlite3.connect(course / "gradebook.db") as db:
        manual = db.execute("SELECT COUNT(*) FROM grade WHERE manual_score IS NOT NULL").fetchone()
    assert manual == (0,)  # the gradebook rewrite reached nothing


def test_feedback_shows_no_hidden_test_source(graded):
    course, _, _, _ = graded
    source = nbformat.read(SOURCE, as_version=4)
    hidden = []
    for cell in source.cells:
        text = cell.source
        if "### BEGIN HIDDEN TESTS" in text:
            region = text.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS")[0]
            hidden += [line.strip() for line in region.splitlines() if len(line.strip()) > 12]
    assert hidden
    pages = list((course / "feedback").rglob("*.html"))
    assert len(pages) >= 20
    import html

    for page in pages:
        text = html.unescape(page.read_text())
        leaked = [line for line in hidden if line in text]
        assert not leaked, (page, leaked[:3])
    mib = html.unescape((course / "feedback" / "mistake-mib" / ASSIGNMENT /
                         f"{ASSIGNMENT}.html").read_text())
    assert MISTAKES["mib"].hint in mib  # the failure message itself still shows


def test_second_run_grades_only_what_changed(graded):
    course, _, _, _ = graded
    again = course_grade(course)
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(o["this_run"] != "graded" for o in report(course).values())
    nbformat.write(make_submission(RELEASE, SOLUTIONS),
                   course / "submitted" / "blank" / ASSIGNMENT / NOTEBOOK)
    third = course_grade(course)
    rerun = {s for s, o in report(course).items() if o["this_run"] == "graded"}
    assert third.returncode == 0 and rerun == {"blank"}
    assert report(course)["blank"]["score"] == TOTAL


def test_refuses_without_bwrap_and_warns_with_no_sandbox(graded, tmp_path):
    course, _, _, _ = graded
    config = course / "nbgrader_config.py"
    original = config.read_text()
    try:
        config.write_text(original + '\nc.Sandbox.bwrap = "/nonexistent/bwrap"\n')
        refused = course_grade(course)
        warned = course_grade(course, "--no-sandbox")
    finally:
        config.write_text(original)
    assert refused.returncode == 2 and "bubblewrap" in refused.stderr
    assert warned.returncode == 0 and "WARNING: --no-sandbox" in warned.stderr


# The ordinary user the tests grade as: nobody when run as root (CI), else oneself.
ORDINARY = 65534 if os.geteuid() == 0 else os.geteuid()
FORKS = """
import json, os, sys, time
from autograder.kernel_entry import apply_limits
apply_limits({"max_processes": 12})
started = 0
try:
    for _ in range(40):
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        started += 1
except OSError:
    pass
print(json.dumps({"uid": os.getuid(), "started": started}))
"""


def as_ordinary_user(argv: list[str], home: Path, timeout: int = 600):
    """Run as ORDINARY. From root: setpriv to nobody, inside an outer bwrap that only
    opens this machine's Python (under /root/.pyenv, 0700) to nobody, the way a
    laptop's Python is open to its user."""
    env = {"PATH": f"{Path(CLI).parent}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    outer = []
    if os.geteuid() == 0:
        python_home = os.path.realpath(sys.base_prefix).split("/versions/")[0]
        outer = ["bwrap", "--dev-bind", "/", "/", "--perms", "0755", "--tmpfs", "/root",
                 "--ro-bind", python_home, python_home, "--",
                 "setpriv", f"--reuid={ORDINARY}", f"--regid={ORDINARY}", "--clear-groups"]
    return subprocess.run(outer + argv, capture_output=True, text=True, timeout=timeout, env=env)


def give_to_ordinary_user(base: Path) -> None:
    if os.geteuid() == 0:
        for path in [base, *base.rglob("*")]:
            os.chown(path, ORDINARY, ORDINARY, follow_symlinks=False)


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline)
    return found


def test_killed_run_resumes_as_an_ordinary_user_and_equals_the_parallel_run(graded):
    """A handful of the class, graded again serially in a copy of the graded course. The
    run is killed after its first grade; the re-run, as an ordinary user (kernels in user
    namespaces, not uids), finishes the rest without counting anything twice, stops the
    fork bomb, and every grade equals the parallel (-j 2) run's."""
    graded_course, _, _, _ = graded
    parallel = report(graded_course)
    base = Path(tempfile.mkdtemp(prefix="cg-nobody-", dir="/tmp"))  # nobody can reach it
    course = base / "course"
    shutil.copytree(graded_course, course, symlinks=True)
    picks = ["ada", "fork-bomb", "mistake-mib"]
    for folder in (course / "submitted").iterdir():
        if folder.name not in picks:
            shutil.rmtree(folder)
    shutil.rmtree(course / ".course-grade")  # forget what was graded: all three are new
    with sqlite3.connect(course / "gradebook.db") as db:
        submissions_before = db.execute("SELECT COUNT(*) FROM submitted_assignment").fetchone()
    ledger = course / ".course-grade" / ASSIGNMENT / "ledger"
    try:
        run = subprocess.Popen([CLI, ASSIGNMENT, "--course", str(course), "-j", "1",
                                "--no-progress"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(list(ledger.glob("*.json"))) < 1:
            time.sleep(0.2)
        # Kill it while a sandboxed kernel of the next submission is running.
        while time.monotonic() < deadline and not any(
                "kernel_entry" in p for p in processes_mentioning(str(course))):
            time.sleep(0.05)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        # The killed grader's sandboxed kernels die with it: none is left running.
        deadline = time.monotonic() + 15
        while processes_mentioning(str(course)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_mentioning(str(course)) == []
        done_before = {p.stem for p in ledger.glob("*.json")}
        assert 1 <= len(done_before) < len(picks)

        give_to_ordinary_user(base)
        resumed = as_ordinary_user([CLI, ASSIGNMENT, "--course", str(course), "-j", "1",
                             "--no-progress"], home=base)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        serial = {s: o for s, o in report(course).items() if s in picks}
        assert {s for s, o in serial.items() if o["this_run"] == "graded"} == \
            set(picks) - done_before
        assert {s: (o["score"], o["fate"]) for s, o in serial.items()} == \
            {s: (parallel[s]["score"], parallel[s]["fate"]) for s in picks}
        assert parallel["fork-bomb"]["fate"] == "killed for memory"
        with sqlite3.connect(course / "gradebook.db") as db:
            assert db.execute("SELECT COUNT(*) FROM submitted_assignment").fetchone() == \
                submissions_before
        regraded = course / "autograded" / (sorted(set(picks) - done_before)[0]) / ASSIGNMENT
        assert (regraded / NOTEBOOK).stat().st_uid == ORDINARY
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_without_root_the_process_limit_holds_in_the_kernels_user_namespace():
    from autograder.sandbox import Sandbox

    work = Path(tempfile.mkdtemp(prefix="cg-nobody-", dir="/tmp"))
    try:
        give_to_ordinary_user(work)
        # What the pipeline runs without root: Sandbox.argv adds --unshare-user there.
        sandbox = as_ordinary_user([sys.executable, "-c", "import json, sys; from autograder.sandbox "
                             "import Sandbox; print(json.dumps(Sandbox().argv("
                             f"__import__('pathlib').Path({str(work)!r}), [], None)))"], work)
        argv = json.loads(sandbox.stdout)
        assert "--unshare-user" in argv
        if os.geteuid() == 0:  # root drops to a uid instead
            assert "--unshare-user" not in Sandbox().argv(work, [], None)
        forks = as_ordinary_user(argv + [sys.executable, "-c", FORKS], work, timeout=120)
        assert forks.returncode == 0, forks.stderr
        got = json.loads(forks.stdout)
        # 12 processes in the namespace's count, the python itself among them.
        assert got["uid"] == ORDINARY and 1 <= got["started"] <= 11
    finally:
        shutil.rmtree(work, ignore_errors=True)
