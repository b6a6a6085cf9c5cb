"""The exercises use the lesson's own model: what gpu_data_loading's questions 1, 2 and 4
count as right is what ``gpucourse.input_pipeline.Pipeline`` computes.

Answers computed by ``Pipeline`` (and a ``steady_state`` that asks ``Pipeline`` for every
case a test gives it) must pass every test cell of those questions, hidden tests
included: so every expected value the tests hold, for every case they ask, is Pipeline's.
"""

from __future__ import annotations

import nbformat
import pytest
from test_release import checks_of
from units import submissions

from gpucourse.input_pipeline import Pipeline, Settings, Speeds

SUBS = submissions("gpu_data_loading")


def pipeline(stage_ms: dict, workers: int, overlap: bool) -> Pipeline:
    """The lesson's pipeline with these stage times: a copy of 10**6 bytes at the speed
    that takes stage_ms["copy"]; overlap means pinned memory and a side stream, both."""
    gb_s = 1 / stage_ms["copy"]
    speeds = Speeds(
        batch=1,
        uint8_bytes=10**6,
        load_ms=stage_ms["load"],
        normalize_ms=0.0,
        pinned_gb_s=gb_s,
        pageable_gb_s=gb_s,
        compute_ms=stage_ms["compute"],
    )
    return Pipeline(
        speeds, Settings(workers=workers, pinned=overlap, side_stream=overlap, dtype="uint8")
    )


def _test_cells(prefix: str) -> dict[str, str]:
    nb = nbformat.read(SUBS.SOURCE, as_version=4)
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell.source
        for cell in nb.cells
        if cell.metadata.get("nbgrader", {}).get("grade")
        and cell.metadata["nbgrader"]["grade_id"].startswith(prefix)
    }


def _run(cells: dict[str, str], answers: dict) -> dict[str, str]:
    """Runs the test cells on `answers`; grade_id -> failure message, for those that fail."""
    checks = checks_of(SUBS)
    checks.maps[0].update(answers)  # the notebook's namespace, where `answer` reads
    failures = {}
    for grade_id, code in cells.items():
        try:
            exec(compile(code, grade_id, "exec"), checks.maps[0])
        except AssertionError as failure:
            failures[grade_id] = str(failure)
    return failures


def test_steady_state_tests_expect_what_the_lessons_pipeline_computes_for_every_case():
    asked = []

    def steady_state(stage_ms, workers, overlap):
        asked.append((dict(stage_ms), workers, overlap))
        model = pipeline(stage_ms, workers, overlap)
        return model.steady_ms(), model.bottleneck()

    cells = _test_cells("test_q4_")
    assert set(cells) == {
        "test_q4_form",
        "test_q4_sequential",
        "test_q4_overlapped",
        "test_q4_workers",
        "test_q4_bottleneck",
    }
    assert _run(cells, {"steady_state": steady_state}) == {}
    # Every kind of case was asked: the main process, workers with and without overlap.
    assert {(workers > 0, overlap) for _, workers, overlap in asked} == {
        (False, False),
        (False, True),
        (True, False),
        (True, True),
    }
    assert any(pipeline(*case).bottleneck() == "copy + compute" for case in asked)


def test_the_check_yourself_answers_are_the_pipelines():
    """Question 1 (one after another: the main process loads; all overlapped: a worker,
    pinned memory and a side stream) and question 2 (workers, all overlapped)."""
    one_after_another = pipeline({"load": 5.0, "copy": 2.0, "compute": 8.0}, 0, False)
    overlapped = pipeline({"load": 5.0, "copy": 2.0, "compute": 8.0}, 1, True)
    answers = {
        "sequential_ms": one_after_another.steady_ms(),
        "overlapped_ms": overlapped.steady_ms(),
        "gpu_busy_percent": 100 * one_after_another.gpu_busy(),
        "one_worker_ms": pipeline({"load": 12.0, "copy": 2.0, "compute": 8.0}, 1, True).steady_ms(),
        "two_workers_ms": pipeline(
            {"load": 12.0, "copy": 2.0, "compute": 8.0}, 2, True
        ).steady_ms(),
        "fewest_workers": min(
            w
            for w in range(1, 10)
            if pipeline({"load": 12.0, "copy": 2.0, "compute": 8.0}, w, True).bottleneck() != "load"
        ),
    }
    assert _run({**_test_cells("test_q1_"), **_test_cells("test_q2_")}, answers) == {}


@pytest.mark.parametrize(
    "workers, overlap, expected", [(0, True, 23.0), (2, False, 11.0), (2, True, 8.0)]
)
def test_the_model_the_tests_agree_with(workers, overlap, expected):
    """Pipeline itself: the main process loads one batch after another (the sum); with
    workers and no overlap, the slower of load / workers and copy + compute; with workers
    and overlap, the slowest stage."""
    model = pipeline({"load": 12, "copy": 3, "compute": 8}, workers, overlap)
    assert model.steady_ms() == pytest.approx(expected)
