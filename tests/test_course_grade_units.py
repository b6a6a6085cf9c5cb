"""course-grade grades every unit like the first: the solution full marks, the release 0,
other right answers full marks, and a few mistakes exactly their score with their hint.

Each unit's handful of submissions is graded in a fresh course by the real course-grade,
so its tests run in the trusted test kernel on answers fetched across the bridge as plain
data: floats and strings, models, optimizers with their state, tensors on meta, a BytesIO,
exceptions. The whole class of gpu_tensors, tricks included, is in test_pipeline.py.
"""
from __future__ import annotations

import html
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.class_fixture import ASSIGNMENT, build_course, nbgrader
from units import ROOT, UNITS, submissions

CLI = str(Path(sys.executable).parent / "course-grade")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/setup --system installs it)")]


def _cases(subs) -> dict[str, tuple[nbformat.NotebookNode, float, str | None]]:
    """student -> (notebook, expected score, a hint its feedback must show)."""
    cases = {"solution": (subs.make_submission(subs.RELEASE, subs.SOLUTIONS), subs.TOTAL, None),
             "blank": (subs.make_submission(subs.RELEASE, {}), 0.0, None)}
    for name, answers in subs.FULL_MARKS.items():
        cases[name.replace("_", "-")] = (subs.make_submission(subs.RELEASE, answers), subs.TOTAL, None)
    for name in subs.COURSE_GRADE_SAMPLE:
        mistake = subs.MISTAKES[name]
        cases[f"mistake-{name.replace('_', '-')}"] = (
            subs.make_submission(subs.RELEASE, mistake.answers), mistake.score, mistake.hint)
    return cases


# The first unit's whole class (right answers, every mistake, tricks) is graded by
# course-grade in test_pipeline.py; here the units after it.
@pytest.fixture(scope="module", params=[u for u in UNITS if u != ASSIGNMENT])
def graded(request, tmp_path_factory):
    unit = request.param
    subs = submissions(unit)
    tmp = tmp_path_factory.mktemp(f"grade-{unit}")
    course = build_course(tmp)  # the test course, with the first unit in its gradebook
    if unit != ASSIGNMENT:
        shutil.copytree(ROOT / "source" / unit, course / "source" / unit)
        nbgrader(course, "generate_assignment", unit, "--force")
    inbox = tmp / "inbox"
    inbox.mkdir()
    cases = _cases(subs)
    for student, (nb, _, _) in cases.items():
        nbformat.write(nb, inbox / f"{student}.ipynb")
    result = subprocess.run([CLI, unit, "--course", str(course), "--folder", str(inbox),
                             "--no-progress", "-j", "2"],
                            capture_output=True, text=True, timeout=900,
                            env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    return unit, course, cases, result


def test_the_unit_is_graded_and_each_submission_earns_its_expected_score(graded):
    unit, course, cases, result = graded
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r["student_id"]: r for r in
            json.loads((course / "reports" / unit / "report.json").read_text())}
    got = {student: (rows[student]["fate"], rows[student]["score"]) for student in cases}
    assert got == {student: ("graded", score) for student, (_, score, _) in cases.items()}
    assert all(not any("withheld" in d for d in rows[s]["details"]) for s in cases)


def test_each_mistakes_hint_reaches_its_feedback_without_the_hidden_tests(graded):
    unit, course, cases, _ = graded
    source = nbformat.read(course / "source" / unit / f"{unit}.ipynb", 4)
    hidden = [line.strip() for cell in source.cells for line in
              cell.source.split("### BEGIN HIDDEN TESTS", 1)[-1].split("### END HIDDEN TESTS")[0].splitlines()
              if "### BEGIN HIDDEN TESTS" in cell.source and len(line.strip()) > 30]
    assert hidden
    for student, (_, _, hint) in cases.items():
        page = html.unescape((course / "feedback" / student / unit / f"{unit}.html").read_text())
        if hint is not None:
            assert hint in page, student
        assert not [line for line in hidden if line in page], student
