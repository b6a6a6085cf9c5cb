"""course-grade on a whole class: scores, fates, nothing touched, feedback, re-runs."""

from __future__ import annotations

import hashlib
import json
import os
import re
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

from autograder.coordinator import importers
from tests import stuck
from tests.class_fixture import (
    ASSIGNMENT,
    NOTEBOOK,
    build_course,
    full_class,
    place_class,
    sentinel,
)
from tests.run_as import run_as
from tests.submissions_gpu_tensors import (
    MISTAKES,
    RELEASE,
    SOLUTIONS,
    SOURCE,
    TOTAL,
    make_submission,
)

CLI = str(Path(sys.executable).parent / "course-grade")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.first,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    ),
]
SOURCE_TABLES = (
    "course",
    "assignment",
    "notebook",
    "base_cell",
    "grade_cells",
    "solution_cells",
    "task_cells",
    "source_cell",
)


def course_grade(course: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    # Under pytest-timeout's 600 s: a run that hangs fails with where it waits.
    return stuck.run([CLI, ASSIGNMENT, "--course", str(course), "--no-progress", *args], 480, **kw)


def tree_hashes(folder: Path, skip=()) -> dict[str, str]:
    """Every file's hash and mode, and every link's target, under ``folder``."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if rel.split("/")[0] in skip:
            continue
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = f"{p.stat().st_mode:o}:" + hashlib.sha256(p.read_bytes()).hexdigest()
    return out


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
    importers.record_problems(course, ASSIGNMENT, importers.import_exchange(course, ASSIGNMENT))
    importers.record_problems(
        course, ASSIGNMENT, importers.import_zip(course, ASSIGNMENT, inputs["zip"])
    )
    before = {
        "source": tree_hashes(course / "source"),
        "release": tree_hashes(course / "release"),
        "rows": source_rows(course),
        "config": tree_hashes(course)["nbgrader_config.py"],
        # everything beside the course: the sentinel, the exchange, the inbox, the zip
        "outside": tree_hashes(tmp, skip=("course",)),
        "submitted": tree_hashes(course / "submitted"),
    }
    # The folder import happens in the same command that grades.
    started = time.monotonic()
    log_file = tmp_path_factory.mktemp("logs") / "grading.log"
    result = course_grade(
        course, "--folder", str(inputs["folder"]), "-j", "2", "--log-file", str(log_file)
    )
    before["seconds"] = time.monotonic() - started
    before["log"] = log_file
    before["inbox"] = inputs["folder"]
    return course, cases, before, result


def test_batch_completes_with_a_fate_for_every_submission(graded):
    course, cases, _, result = graded
    assert result.returncode == 0, result.stderr[-3000:]
    assert set(report(course)) == {c.student for c in cases}
    assert len(cases) >= 25
    import csv

    with open(course / "grades.csv", newline="") as f:
        listed = {row["student_id"] for row in csv.DictReader(f)}
    assert listed == {c.student for c in cases}  # every student, graded or not


def test_the_log_file_holds_every_submission_and_nbgraders_own_lines(graded):
    """course-grade --log-file: a line per graded submission from the coordinator, and
    the workers' lines (nbgrader's own included), each naming its process."""
    course, cases, before, _ = graded
    text = before["log"].read_text()
    for student, row in report(course).items():
        if row["fate"] in ("graded", "timed out", "killed for memory", "too many processes"):
            assert f"autograder.coordinator.grade INFO: {student}: {row['fate']}" in text, student
    assert " autograder.nbgrader.Autograde." in text
    assert "ForkServerProcess" in text and "MainProcess" in text
    # nbgrader's false alarm for a test cell exactly as released (jupyter/nbgrader#1961)
    # is left out; a cell a student changed is still named.
    released = {
        cell.metadata.nbgrader["grade_id"]: cell.metadata.nbgrader.get("checksum")
        for cell in nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4).cells
        if "nbgrader" in cell.metadata and "grade_id" in cell.metadata.nbgrader
    }
    alarms = re.findall(r"Attribute 'checksum' for cell (\S+) has changed! .*got: (\w+)\)", text)
    assert alarms, "no submission of the class changes a test cell"
    assert not [(cell, got) for cell, got in alarms if released.get(cell) == got]


def test_every_score_and_fate(graded):
    course, cases, _, _ = graded
    outcomes = report(course)
    wrong = []
    for case in cases:
        got = outcomes.get(case.student, {"score": None, "fate": "(no outcome)", "details": []})
        if got["score"] != case.expected_score or got["fate"] != case.expected_fate:
            wrong.append(
                (
                    case.student,
                    case.expected_score,
                    case.expected_fate,
                    got["score"],
                    got["fate"],
                    got["details"],
                )
            )
        want = case.expected_detail
        if isinstance(want, list) and got["details"] != want:
            wrong.append((case.student, "details", want, got["details"]))
        elif isinstance(want, str) and not any(want in d for d in got["details"]):
            wrong.append((case.student, "detail", want, got["details"]))
    assert not wrong


def test_tricks_gain_nothing_and_cover_every_weakness(graded):
    """Every trick scores at most what its answers earn honestly (the trick's file works
    that out from the tests its honest answers fail), never full marks, and each weakness
    of issue 8 has at least two tricks of its own."""
    from tests.hostile._common import WEAKNESSES

    course, cases, _, _ = graded
    outcomes = report(course)
    tricks = [c for c in cases if c.weakness]
    for case in tricks:
        if case.route == "placed":
            continue
        got = outcomes[case.student]["score"]
        if case.expected_score is None:  # refused: no grade at all
            assert got is None, case.student
        else:
            assert got <= case.expected_score < TOTAL, case.student
    per_weakness = {w: {c.student for c in tricks if c.weakness == w} for w in WEAKNESSES}
    assert all(len(students) >= 2 for students in per_weakness.values()), per_weakness


def test_no_test_kernel_problem_in_the_class(graded):
    """The test kernel stood up to every trick: no submission's points were withheld for
    its failure (the only "needs review" fates are import ambiguities)."""
    course, cases, _, _ = graded
    withheld = {
        s: o["details"]
        for s, o in report(course).items()
        if any("withheld" in d for d in o["details"])
    }
    assert withheld == {}


def test_nothing_but_grade_rows_changes(graded):
    course, cases, before, _ = graded
    assert tree_hashes(course / "source") == before["source"]
    assert tree_hashes(course / "release") == before["release"]
    assert tree_hashes(course)["nbgrader_config.py"] == before["config"]
    assert source_rows(course) == before["rows"]
    with sqlite3.connect(course / "gradebook.db") as db:
        manual = db.execute("SELECT COUNT(*) FROM grade WHERE manual_score IS NOT NULL").fetchone()
    assert manual == (0,)  # the gradebook rewrite reached nothing
    # Nothing beside the course changed (the sentinel, the exchange, the downloads), and
    # the sentinel kept its bytes and its mode.
    outside = tree_hashes(course.parent, skip=("course",))
    inbox = str(before["inbox"].relative_to(course.parent))
    assert {k: v for k, v in outside.items() if not k.startswith(inbox)} == {
        k: v for k, v in before["outside"].items() if not k.startswith(inbox)
    }
    assert sentinel(course).stat().st_mode & 0o777 == 0o600
    # What the imports wrote stayed as it was: no submission overwrote another's.
    after = tree_hashes(course / "submitted")
    assert {k: v for k, v in after.items() if k in before["submitted"]} == before["submitted"]


def test_nothing_is_written_outside_its_folder(graded):
    """No import or kernel wrote beside the course's own folders, or under a path id."""
    course, _, _, _ = graded
    allowed = {
        "nbgrader_config.py",
        "source",
        "release",
        "submitted",
        "autograded",
        "feedback",
        "reports",
        "gradebook.db",
        "grades.csv",
        ".course-grade",
    }
    assert {p.name for p in course.iterdir()} <= allowed
    from autograder.coordinator.inbox import valid_student_id

    for top in ("submitted", "autograded", "feedback"):
        assert all(valid_student_id(p.name) for p in (course / top).iterdir()), top
    assert sorted(p.name for p in course.parent.iterdir()) == sorted(
        ["course", "exchange", "inbox", "lms-download.zip", "sentinel.txt"]
    )


def test_submissions_stay_within_their_limits(graded):
    """Flooding and filling submissions leave notebooks, feedback and folders within the
    output cap, and the whole batch within the kernel's wall-time limit per submission."""
    course, _, before, _ = graded
    cap = 1_000_000  # TEST_LIMITS: c.Sandbox.max_output_mb = 1
    for student in (course / "autograded").iterdir():
        folder = student / ASSIGNMENT
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        assert size < cap + 500_000, (student.name, size)
    for page in (course / "feedback").rglob("*.html"):
        assert page.stat().st_size < cap + 1_000_000, page
    seconds = [o["seconds"] for o in report(course).values() if o.get("seconds")]
    assert max(seconds) < 150 + 60  # TEST_LIMITS: c.Sandbox.wall_seconds = 150


def test_feedback_runs_nothing_of_the_students(graded):
    """No feedback page carries a script, an event handler or a javascript: URL that a
    student put there (tests/hostile/script_in_*.py mark theirs with cgxss)."""
    from html.parser import HTMLParser

    class Active(HTMLParser):
        def __init__(self):
            super().__init__()
            self.found, self._in_script = [], False

        def handle_starttag(self, tag, attrs):
            self._in_script = tag == "script"
            for name, value in attrs:
                if name.startswith("on") or "javascript:" in (value or "").lower():
                    self.found.append(f"<{tag} {name}={value!r}>")
            if tag in ("iframe", "object", "embed"):
                self.found.append(f"<{tag}>")

        def handle_data(self, data):
            if self._in_script and "cgxss" in data:
                self.found.append(f"<script>{data[:60]}")

        def handle_endtag(self, tag):
            self._in_script = False

    course, _, _, _ = graded
    pages = {
        s: course / "feedback" / s / ASSIGNMENT / f"{ASSIGNMENT}.html"
        for s in ("trick-script-in-markdown", "trick-script-in-outputs", "ada")
    }
    for student, page in pages.items():
        parser = Active()
        parser.feed(page.read_text())
        assert parser.found == [], (student, parser.found[:5])
    assert "Hi" in pages["trick-script-in-markdown"].read_text()  # the text itself stays
    # Only the notebooks and their own feedback pages come back, with nbgrader's two files
    # that release_feedback reads (written by the grader): no page a student sent.
    nbgrader_files = ("timestamp.txt", "submission_secret.txt")
    for kind, suffix in (("feedback", ".html"), ("autograded", ".ipynb")):
        files = [p.relative_to(course / kind) for p in (course / kind).rglob("*") if p.is_file()]
        assert files and all(
            str(f) == f"{f.parts[0]}/{ASSIGNMENT}/{ASSIGNMENT}{suffix}"
            or (f.parts[1:] in [(ASSIGNMENT, n) for n in nbgrader_files])
            for f in files
        ), (kind, [f for f in files if f.suffix != suffix][:5])


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
    mib = html.unescape(
        (course / "feedback" / "mistake-mib" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    )
    assert MISTAKES["mib"].hint in mib  # the failure message itself still shows


def test_second_run_grades_only_what_changed(graded):
    course, _, _, _ = graded
    again = course_grade(course)
    assert again.returncode == 0, again.stderr[-2000:]
    assert all(o["this_run"] != "graded" for o in report(course).values())
    nbformat.write(
        make_submission(RELEASE, SOLUTIONS), course / "submitted" / "blank" / ASSIGNMENT / NOTEBOOK
    )
    third = course_grade(course)
    rerun = {s for s, o in report(course).items() if o["this_run"] == "graded"}
    assert third.returncode == 0 and rerun == {"blank"}
    assert report(course)["blank"]["score"] == TOTAL


# The ordinary user the tests grade as: nobody when run as root (CI), else oneself.
ORDINARY = 65534 if os.geteuid() == 0 else os.geteuid()
FORKS = """
import json, os, sys, time
from autograder.sandbox.kernel_entry import apply_limits
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
    """Run as ORDINARY (tests/run_as.py)."""
    env = {"PATH": f"{Path(CLI).parent}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return run_as(ORDINARY, ORDINARY, argv, env, timeout=timeout)


def give_to_ordinary_user(base: Path) -> None:
    if os.geteuid() == 0:
        for path in [base, *base.rglob("*")]:
            os.chown(path, ORDINARY, ORDINARY, follow_symlinks=False)


def descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(proc) -> bool:
    try:
        return proc.is_running() and proc.status() != "zombie"
    except Exception:  # noqa: BLE001 - gone
        return False


def cmdline(proc) -> str:
    try:
        return " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - gone, or a zombie
        return ""


def student_kernel(proc) -> bool:
    """A student's kernel serving a submission: started with the submission's files, or
    forked from the students' template (a kernel_entry process whose parent is one too:
    the template itself is a child of bubblewrap)."""
    line = cmdline(proc)
    if "kernel_entry" not in line:
        return False
    if "student-files" in line:
        return True
    try:
        parent = proc.parent()
    except Exception:  # noqa: BLE001 - gone
        return False
    return (
        "cg-student-" in line
        and parent is not None
        and "kernel_entry" in cmdline(parent)
        and "bwrap" not in cmdline(parent).split(" ")[0]
    )


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
        run = subprocess.Popen(
            [CLI, ASSIGNMENT, "--course", str(course), "-j", "1", "--no-progress"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(list(ledger.glob("*.json"))) < 1:
            time.sleep(0.2)
        # Kill it while a student's sandboxed kernel of the next submission is running.
        while time.monotonic() < deadline and not any(
            student_kernel(p) for p in descendants(run.pid)
        ):
            time.sleep(0.05)
        left = descendants(run.pid)
        assert any("kernel_entry" in cmdline(p) for p in left)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        # The killed grader's workers and sandboxed kernels die with it: none is left.
        deadline = time.monotonic() + 15
        while any(alive(p) for p in left) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [cmdline(p)[:120] for p in left if alive(p)] == []
        done_before = {p.stem for p in ledger.glob("*.json")}
        assert 1 <= len(done_before) < len(picks)

        give_to_ordinary_user(base)
        resumed = as_ordinary_user(
            [CLI, ASSIGNMENT, "--course", str(course), "-j", "1", "--no-progress"], home=base
        )
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        serial = {s: o for s, o in report(course).items() if s in picks}
        assert {s for s, o in serial.items() if o["this_run"] == "graded"} == set(
            picks
        ) - done_before
        assert {s: (o["score"], o["fate"]) for s, o in serial.items()} == {
            s: (parallel[s]["score"], parallel[s]["fate"]) for s in picks
        }
        assert parallel["fork-bomb"]["fate"] == "too many processes"
        with sqlite3.connect(course / "gradebook.db") as db:
            assert (
                db.execute("SELECT COUNT(*) FROM submitted_assignment").fetchone()
                == submissions_before
            )
        regraded = course / "autograded" / (sorted(set(picks) - done_before)[0]) / ASSIGNMENT
        assert (regraded / NOTEBOOK).stat().st_uid == ORDINARY
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_without_root_the_process_limit_holds_in_the_kernels_user_namespace():
    work = Path(tempfile.mkdtemp(prefix="cg-nobody-", dir="/tmp"))
    try:
        (work / "staging").mkdir()
        (work / "sockets").mkdir()
        give_to_ordinary_user(work)
        # What the pipeline runs without root: one bwrap with --unshare-user.
        sandbox = as_ordinary_user(
            [
                sys.executable,
                "-c",
                "import json; from pathlib import Path; "
                "from autograder.sandbox.bubblewrap import Sandbox; print(json.dumps("
                f"Sandbox().command(Path({str(work / 'staging')!r}), "
                "[], -1)))",
            ],
            work,
        )
        argv, steps = json.loads(sandbox.stdout)
        assert "--unshare-user" in argv and "--disable-userns" in argv and steps == {}
        forks = as_ordinary_user(argv + [sys.executable, "-c", FORKS], work, timeout=120)
        assert forks.returncode == 0, forks.stderr
        got = json.loads(forks.stdout)
        # 12 processes in the namespace's count, the python itself among them.
        assert got["uid"] == ORDINARY and 1 <= got["started"] <= 11
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_class_report_shows_pass_rates_scores_mistakes_and_fates(graded):
    """reports/<assignment>/class-report.html: a page that opens without a server."""
    from html.parser import HTMLParser

    course, cases, _, _ = graded
    page = (course / "reports" / ASSIGNMENT / "class-report.html").read_text()

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.images, self.scripts, self.alts = [], 0, 0, []
            self._row = None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self._row = []
            elif tag == "img" and dict(attrs).get("src", "").startswith("data:image/png;base64,"):
                self.images += 1
                self.alts.append(dict(attrs).get("alt") or "")
            elif tag == "script":
                self.scripts += 1
            elif tag == "th":
                self._row = None  # a table's header row: not data

        def handle_data(self, data):
            if self._row is not None and data.strip():
                self._row.append(data.strip())

        def handle_endtag(self, tag):
            if tag == "tr" and self._row is not None:
                self.rows.append(self._row)
                self._row = None

    parsed = Tables()
    parsed.feed(page)
    assert parsed.images == 2 and parsed.scripts == 0  # histogram and pass rates, inline
    # Each chart says in words what it shows, for a screen reader: the histogram its counts.
    graded_now = sum(1 for o in report(course).values() if o.get("max_score"))
    assert parsed.alts[0].startswith(f"Scores of {graded_now} graded students"), parsed.alts
    assert all(parsed.alts)
    rows = {row[0]: row for row in parsed.rows}
    # Per question: of the graded submissions, how many had full marks.
    assert rows["test_q2_mb"][2] != "0" and rows["test_q2_mb"][3].endswith("%")
    # The hint of the MiB mistake is counted, once per student who made it.
    mib = [
        row
        for row in parsed.rows
        if len(row) == 3 and "that is in MiB" in row[2] and row[1] == "test_q2_mb"
    ]
    assert mib and int(mib[0][0]) >= 1
    # Only hints are counted there: a crash or a withheld cell is not a misconception.
    hinted = [row for row in parsed.rows if len(row) == 3 and row[1].startswith("test_")]
    assert hinted and not any("not defined" in row[2] or "Withheld" in row[2] for row in hinted)
    from autograder.fates import FATES

    fates = {row[0]: row[1:] for row in parsed.rows if row[0] in FATES}
    graded_ones = sorted(s for s, o in report(course).items() if o["fate"] == "graded")
    assert int(fates["graded"][0]) == len(graded_ones)
    assert fates["graded"][1].split(", ") == graded_ones  # the fates table names its students
    # Per question, and a row per graded student with a column per question.
    assert rows["Question 2"][1] == "6" and rows["Question 2"][3].endswith("%")
    assert [float(x) for x in rows["ada"][1:6]] == [8, 6, 9, 7, TOTAL]
