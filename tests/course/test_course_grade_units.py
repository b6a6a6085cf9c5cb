"""course-grade grades every unit like the first: the solution full marks, the release 0,
other right answers full marks, and a few mistakes exactly their score with their hint.

Each unit's handful of submissions is graded by the real course-grade (one `--all` run
over a course that holds every unit), so its tests run in the trusted test kernel on answers fetched across the bridge as plain
data: floats and strings, models, optimizers with their state, tensors on meta, a BytesIO,
exceptions. The whole class of gpu_tensors, tricks included, is in test_pipeline.py.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from units import ROOT, UNITS, submissions

from tests import mutation, stuck
from tests import submission_kit as kit
from tests.class_fixture import ASSIGNMENT, build_course, hostile_modules, nbgrader

CLI = str(Path(sys.executable).parent / "course-grade")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.first,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    ),
]


def _cases(subs) -> dict[str, tuple[nbformat.NotebookNode, float, tuple[str, ...]]]:
    """student -> (notebook, expected score, the hints its feedback must show). The sample
    of mistakes shares submissions as plain nbgrader's test packs them (first fit: no two
    in one submission change the same answer cell or fail the same test cell), so each
    submission must fail exactly the union of its mistakes' test cells."""
    cases = {
        "solution": (subs.make_submission(subs.RELEASE, subs.SOLUTIONS), subs.TOTAL, ()),
        "blank": (subs.make_submission(subs.RELEASE, {}), 0.0, ()),
    }
    for name, answers in subs.FULL_MARKS.items():
        cases[name.replace("_", "-")] = (
            subs.make_submission(subs.RELEASE, answers),
            subs.TOTAL,
            (),
        )
    for student, pack in _sample_packs(subs).items():
        cases[student.replace("_", "-")] = (
            subs.make_submission(subs.RELEASE, kit.pack_answers(pack, subs.SOLUTIONS)),
            kit.pack_score(pack),
            tuple(mistake.hint for mistake in pack.values()),
        )
    return cases


def _sample_packs(subs) -> dict[str, dict]:
    return kit.packs({name: subs.MISTAKES[name] for name in subs.COURSE_GRADE_SAMPLE})


# A fixed few of each unit's mutants (tests/mutation.py), not listed as equivalent.
MUTANTS = {unit: mutation.sample(unit, 3) for unit in UNITS if unit != ASSIGNMENT}


def _tricks(unit: str, subs) -> dict[str, tuple[nbformat.NotebookNode, str, object]]:
    """student -> (notebook, its twin's student id, the trick's module): the unit's tricks
    on the trusted side (tests/hostile files that name the unit), each with its twin,
    the same answers without the trick (the solution where it has none of its own; one
    submission for the tricks whose twins are the same answers)."""
    tricks = {}
    twins: dict[str, str] = {}  # a twin's answers -> the student id that submits them
    for module in hostile_modules(unit):
        twin = "solution"
        if module.TWIN is not None:
            answers = json.dumps(module.TWIN, sort_keys=True)
            twin = twins.setdefault(answers, f"{module.STUDENT_ID}-twin")
            tricks[twin] = (subs.make_submission(subs.RELEASE, module.TWIN), twin, None)
        tricks[module.STUDENT_ID] = (
            subs.make_submission(subs.RELEASE, module.ANSWERS),
            twin,
            module,
        )
    return tricks


# The first unit's whole class (right answers, every mistake, tricks) is graded by
# course-grade in test_pipeline.py; here the units after it, all in one course and one
# `course-grade --all` run (one set of workers and templates for the three).
LATER_UNITS = [u for u in UNITS if u != ASSIGNMENT]


@pytest.fixture(scope="module")
def graded_all(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grade-units")
    course = build_course(tmp)  # the test course, with the first unit in its gradebook
    placed = {}
    for unit in LATER_UNITS:
        subs = submissions(unit)
        shutil.copytree(ROOT / "source" / unit, course / "source" / unit)
        nbgrader(course, "generate_assignment", unit, "--force")
        cases, tricks = _cases(subs), _tricks(unit, subs)
        notebooks = {student: nb for student, (nb, _, _) in {**cases, **tricks}.items()}
        for i, mutant in enumerate(MUTANTS[unit]):  # scripts/test-the-tests grades them all
            answers = {**subs.SOLUTIONS, mutant.cell: mutant.code}
            notebooks[mutation.student_id(i)] = subs.make_submission(subs.RELEASE, answers)
        for student, nb in notebooks.items():
            folder = course / "submitted" / student / unit
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{unit}.ipynb")
        placed[unit] = (cases, tricks)
    result = stuck.run(  # under pytest-timeout's 600 s: a hang says where it waits
        [CLI, "--all", "--course", str(course), "--no-progress", "-j", "2"],
        540,
        env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    return course, placed, result


@pytest.fixture(params=LATER_UNITS)
def graded(request, graded_all):
    course, placed, result = graded_all
    cases, tricks = placed[request.param]
    return request.param, course, cases, result, tricks


def test_the_unit_is_graded_and_each_submission_earns_its_expected_score(graded):
    unit, course, cases, result, _ = graded
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {
        r["student_id"]: r
        for r in json.loads((course / "reports" / unit / "report.json").read_text())
    }
    got = {student: (rows[student]["fate"], rows[student]["score"]) for student in cases}
    assert got == {student: ("graded", score) for student, (_, score, _) in cases.items()}
    assert all(not any("withheld" in d for d in rows[s]["details"]) for s in cases)


def test_each_pack_of_mistakes_fails_exactly_its_mistakes_test_cells(graded):
    unit, course, _, _, _ = graded
    subs = submissions(unit)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, pack in _sample_packs(subs).items():
            notebook = gb.find_submission(unit, student.replace("_", "-")).notebooks[0]
            failed = {g.name for g in notebook.grades if g.auto_score != subs.POINTS[g.name]}
            assert failed == kit.pack_fails(pack), (student, sorted(pack))


def test_each_mistakes_hint_reaches_its_feedback_without_the_hidden_tests(graded):
    unit, course, cases, _, tricks = graded
    source = nbformat.read(course / "source" / unit / f"{unit}.ipynb", 4)
    hidden = [
        line.strip()
        for cell in source.cells
        for line in cell.source.split("### BEGIN HIDDEN TESTS", 1)[-1]
        .split("### END HIDDEN TESTS")[0]
        .splitlines()
        if "### BEGIN HIDDEN TESTS" in cell.source and len(line.strip()) > 30
    ]
    assert hidden
    for student, (_, _, hints) in {**cases, **tricks}.items():
        page = html.unescape((course / "feedback" / student / unit / f"{unit}.html").read_text())
        if student in cases:
            assert [hint for hint in hints if hint not in page] == [], student
        assert not [line for line in hidden if line in page], student


def test_tricks_on_the_trusted_side_gain_nothing(graded):
    """Issue 17's attacks on the bridge and the test kernel, one file each in
    tests/hostile: each scores at most what its twin (the same answers without the trick)
    scores, the test kernel stands up to it (the fate is graded, nothing withheld), and
    no student's words reach the class report as the tests'."""
    from tests.hostile._common import TRUSTED_SIDE

    unit, course, _, result, tricks = graded
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {
        r["student_id"]: r
        for r in json.loads((course / "reports" / unit / "report.json").read_text())
    }
    report_page = (course / "reports" / unit / "class-report.html").read_text()
    for student, (_, twin, module) in tricks.items():
        if module is None:
            continue
        got, honest = rows[student], rows[twin]
        assert got["fate"] == "graded" and honest["fate"] == "graded", (student, got["details"])
        assert got["score"] <= honest["score"], (student, got["score"], honest["score"])
        assert module.WEAKNESS in TRUSTED_SIDE
        if getattr(module, "COSTLY", False):  # the report says which answer was refused
            assert any("too costly to check" in d for d in got["details"]), got["details"]
        for words in getattr(module, "NEVER_IN_REPORT", ()):
            assert words not in report_page, (student, words)
        if getattr(module, "ECHOES_HIDDEN_INPUTS", False):
            subs = submissions(unit)
            pages = [
                html.unescape((course / "feedback" / s / unit / f"{unit}.html").read_text())
                for s in (student, twin)
            ]
            shown = set(subs.answer_values_in(pages[0])) - set(subs.answer_values_in(pages[1]))
            assert not shown, (student, shown)


def test_a_sample_of_mutants_of_the_solution_is_killed(graded):
    """Each sampled mutant of the solution (one small change: a number, an operator, a
    call dropped...) loses points, unless tests/equivalent_mutants_<unit>.txt says why it
    is still right; scripts/test-the-tests grades every mutant."""
    unit, course, _, result, _ = graded
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {
        r["student_id"]: r
        for r in json.loads((course / "reports" / unit / "report.json").read_text())
    }
    total = submissions(unit).TOTAL
    survived = [
        m.diff()
        for i, m in enumerate(MUTANTS[unit])
        if rows[mutation.student_id(i)]["score"] >= total
    ]
    assert MUTANTS[unit] and not survived, "\n".join(survived)
