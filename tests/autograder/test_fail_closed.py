"""When the test kernel cannot finish, points are withheld, never given, and the fate says
why; a worn (reused) test kernel is replaced and the submission graded again once.

The worker runs in this process, so that faults can be put into the test kernel's part.
"""

from __future__ import annotations

import shutil

import nbformat
import pytest

from autograder.config import grading_config
from autograder.coordinator import cli, grade, inbox
from autograder.job import Job
from autograder.sandbox.manager import kill_tree
from autograder.worker import trusted_kernel, worker
from tests.class_fixture import ASSIGNMENT, NOTEBOOK, build_course
from tests.submissions_gpu_tensors import RELEASE, SOLUTIONS, TOTAL, make_submission

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    ),
]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = build_course(tmp_path_factory.mktemp("fail-closed"))
    folder = course / "submitted" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(make_submission(RELEASE, SOLUTIONS), folder / NOTEBOOK)
    yield course
    trusted_kernel.close_all()


def grade_ada(course) -> dict:
    """Grade ada's submission in this process, as a worker would, and record it."""
    files, _ = inbox.read_submission(
        course / "submitted" / "ada" / ASSIGNMENT, grading_config(course)
    )
    result = worker.grade_job(Job("ada", "digest", files, grade.course_files(course, ASSIGNMENT)))
    return grade.record(course, ASSIGNMENT, result)


def grade_answers_alone(tmp_path, answers: dict, config: str = "") -> dict:
    """ada's submission of ``answers``, graded in a course of its own (``config`` added)
    on a fresh test kernel."""
    trusted_kernel.close_all()
    course = build_course(tmp_path, config)
    folder = course / "submitted" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(make_submission(RELEASE, answers), folder / NOTEBOOK)
    try:
        return grade_ada(course)
    finally:
        trusted_kernel.close_all()


def gradebook_scores(course) -> dict[str, float]:
    from nbgrader.api import Gradebook

    from autograder.config import grading_config

    with Gradebook(grading_config(course).CourseDirectory.db_url) as gb:
        notebook = gb.find_submission(ASSIGNMENT, "ada").notebooks[0]
        return {g.name: g.score for g in notebook.grades}


def fault_in_run_test(monkeypatch, fail_calls: set[int], kill: bool = False) -> list:
    """Make the test kernel fail on the given calls of Session.run_test (1-based)."""
    calls = []
    original = trusted_kernel.Session.run_test

    async def run_test(self, grade_id, bridge, fetch=True, **kw):
        calls.append(grade_id)
        if len(calls) in fail_calls:
            if kill:  # a real death: the test kernel's whole process tree goes
                kill_tree(self.kernel.km.provisioner.pid)
            else:
                raise trusted_kernel.TrustedKernelProblem("injected fault")
        return await original(self, grade_id, bridge, fetch, **kw)

    monkeypatch.setattr(trusted_kernel.Session, "run_test", run_test)
    return calls


def test_points_are_withheld_when_the_test_kernel_dies(course, monkeypatch):
    trusted_kernel.close_all()  # a fresh test kernel: no retry can hide the fault
    fault_in_run_test(monkeypatch, {5}, kill=True)
    outcome = grade_ada(course)
    assert outcome["fate"] == "needs review" and outcome["score"] == 0.0
    assert any("the test kernel died" in d and "withheld" in d for d in outcome["details"])
    assert set(gradebook_scores(course).values()) == {0.0}  # tests that passed before too
    page = (course / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "points withheld until the grader can check this" in page


def test_a_fault_on_a_reused_test_kernel_is_graded_again_on_a_fresh_one(course, monkeypatch):
    trusted_kernel.close_all()
    assert grade_ada(course)["score"] == TOTAL  # starts the template
    started = [k.starts for k in trusted_kernel._TEMPLATES.values()]
    calls = fault_in_run_test(monkeypatch, {3})
    outcome = grade_ada(course)
    assert outcome["fate"] == "graded" and outcome["score"] == TOTAL
    assert len(calls) > 19  # the first attempt stopped at its third test; all ran again
    assert [k.starts for k in trusted_kernel._TEMPLATES.values()] == [1]  # a new kernel
    assert started == [1]


def test_a_fault_that_persists_withholds_and_a_later_regrade_gives_the_points(course, monkeypatch):
    trusted_kernel.close_all()
    fault_in_run_test(monkeypatch, set(range(1, 100)))
    outcome = grade_ada(course)
    assert outcome["fate"] == "needs review" and "injected fault" in " ".join(outcome["details"])
    monkeypatch.undo()
    again = grade_ada(course)  # what `course-grade --force` does for it
    assert again["fate"] == "graded" and again["score"] == TOTAL


def test_a_student_who_spends_the_wall_time_in_a_test_call_is_timed_out_not_a_grader_error(
    tmp_path,
):
    """Attack 19 (bridge, a07): answer cells used up most of the wall-time limit, then a
    function a test calls slept past it. Both kernels were killed at once (each had the
    same limit, counted from nearly the same moment), and the test kernel's end was the
    grader's own failure: `error`, 10 minutes again on every run. The student's kernel
    reaches its limit first: a verdict about the submission, the later tests score 0."""
    answers = dict(SOLUTIONS)
    answers["q1_prepare_batch"] += "\nimport time\ntime.sleep(6)\n"
    answers["q2_mb"] += "\nimport time\ntime.sleep(6)\n"
    answers["q3_race_ticks"] = (
        "import time\n"
        "def race_ticks(steps, numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
        "    time.sleep(30)\n"
    )
    config = "c.Execute.timeout = 30\nc.Sandbox.wall_seconds = 14\n"
    outcome = grade_answers_alone(tmp_path, answers, config)
    assert outcome["fate"] == "timed out", outcome["details"]
    assert any("wall time" in d for d in outcome["details"]), outcome["details"]
    assert 0 < outcome["score"] < TOTAL  # the tests before the call kept their points


def test_an_answer_whose_repr_is_huge_fails_its_tests_and_is_graded(tmp_path):
    """Attack 20 (a05): a string answer of 4 M characters that ``repr`` writes 10 to a
    character; a test's message quoted it, and the test kernel's error (40 M characters,
    twice in one message) was over the size the grader takes from it: the grader waited
    out the cell and withheld every point (`needs review`, graded again on every run).
    The test kernel cuts what it sends: the answer's tests fail, the rest are graded."""
    answers = {**SOLUTIONS, "q1_second_problem": 'second_problem = "\\U000e0001" * 3_990_000'}
    outcome = grade_answers_alone(tmp_path, answers)
    assert outcome["fate"] == "graded", outcome["details"]
    assert 0 < outcome["score"] < TOTAL


def _spin(*args, **kwargs):
    while True:
        pass


def _hog(*args, **kwargs):
    held = []
    while True:
        held.append(bytearray(16 << 20))


@pytest.mark.parametrize(
    ("cost", "limits", "why"),
    [
        (_spin, {"cpu_seconds": 1}, "more than 1 s of CPU"),
        # (the CPU well above what 300 MB of page faults cost, so that memory ends it)
        (_hog, {"memory": 300 << 20}, "more than 300 MB of memory"),
    ],
    ids=["cpu", "memory"],
)
def test_a_feedback_page_past_its_limits_is_a_plain_page_of_scores_and_the_grade_stands(
    course, monkeypatch, cost, limits, why
):
    """Every slow path of nbconvert and bleach on a student's notebook is bounded by the
    child the page is made in (``worker.feedback_in_child``): here making the page
    itself never ends, or never stops allocating."""
    from autograder.worker import feedback, limited_child

    grade_ada(course)  # the worker prepares the course (and warms its caches) unpatched
    monkeypatch.setattr(worker, "FEEDBACK_LIMITS", limited_child.Limits(**limits))
    monkeypatch.setattr(feedback.FeedbackExporter, "from_notebook_node", cost)
    (course / "submitted" / "ada" / ASSIGNMENT / "again.txt").write_text(why)  # a new digest
    outcome = grade_ada(course)
    assert outcome["fate"] == "graded" and outcome["score"] == TOTAL, outcome["details"]
    assert any(
        d.startswith("feedback: a plain page of scores only") and why in d
        for d in outcome["details"]
    ), outcome["details"]
    page = (course / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert why in page and f"<strong>{TOTAL:g} / {TOTAL:g}</strong>" in page
    assert page.count("<tr>") == 1 + len(gradebook_scores(course))  # a row per graded cell
    page_path = course / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    page_path.unlink()
    cli.regenerate_feedback(course, ASSIGNMENT, [{"student_id": "ada"}])  # --report-only's
    assert why in page_path.read_text() and f"{TOTAL:g} / {TOTAL:g}" in page_path.read_text()
    for name in worker.NBGRADER_FILES:  # what release_feedback reads beside the page
        kept = course / "autograded" / "ada" / ASSIGNMENT / name
        assert (page_path.parent / name).read_bytes() == kept.read_bytes()
    monkeypatch.undo()
    page_again = grade_ada(course)
    assert "a plain page" not in " ".join(page_again["details"])
    page = (course / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "could not be made" not in page and "rendered_html" in page
