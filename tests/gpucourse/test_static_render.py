"""Static renderers (GitHub, nbviewer, nbconvert): the notebooks are valid, any saved
widget state has the shape GitHub needs, and the lesson shows its race without a kernel."""

from __future__ import annotations

import json
import re
from functools import cache
from html import unescape
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from units import UNITS

ROOT = Path(__file__).resolve().parents[2]
COURSE_NOTEBOOKS = sorted(
    path.relative_to(ROOT).as_posix()
    for pattern in ["notebooks/*.ipynb", "source/*/*.ipynb", "release/*/*.ipynb"]
    for path in ROOT.glob(pattern)
)
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LESSON = "notebooks/gpu_tensors.ipynb"


@cache
def render(name: str) -> str:
    """The notebook as nbconvert's HTML, from its saved outputs only: no kernel runs."""
    html, _ = exporter().from_notebook_node(nbformat.read(ROOT / name, as_version=4))
    return html


@cache
def exporter() -> HTMLExporter:
    return HTMLExporter()


@pytest.mark.parametrize("unit", UNITS)
def test_the_course_notebooks_are_all_here(unit):
    for name in [
        f"notebooks/{unit}.ipynb",
        f"source/{unit}/{unit}.ipynb",
        f"release/{unit}/{unit}.ipynb",
    ]:
        assert name in COURSE_NOTEBOOKS, f"{name} is missing"


@pytest.mark.parametrize("name", COURSE_NOTEBOOKS)
def test_notebook_validates_with_nbformat(root, name):
    notebook = nbformat.read(root / name, as_version=nbformat.NO_CONVERT)
    assert notebook.nbformat == 4
    nbformat.validate(notebook)  # raises ValidationError with the offending path


@pytest.mark.parametrize("name", COURSE_NOTEBOOKS)
def test_saved_widget_state_has_the_shape_github_needs(root, name):
    notebook = nbformat.read(root / name, as_version=4)
    views = {
        output["data"][WIDGET_VIEW]["model_id"]
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if WIDGET_VIEW in output.get("data", {})
    }
    widgets = notebook.metadata.get("widgets")
    if widgets is None:
        assert not views, (
            f"{name}: outputs show widgets {sorted(views)} but no widget state "
            "is saved; GitHub shows an error instead of the notebook"
        )
        return
    # GitHub refuses the whole notebook when this is malformed ("the 'state' key is missing").
    assert WIDGET_STATE in widgets, f"{name}: metadata.widgets lacks {WIDGET_STATE!r}"
    saved = widgets[WIDGET_STATE]
    assert isinstance(saved.get("state"), dict), f"{name}: widget state lacks 'state'"
    assert isinstance(saved.get("version_major"), int)
    assert isinstance(saved.get("version_minor"), int)
    missing = views - set(saved["state"])
    assert not missing, f"{name}: widget views {sorted(missing)} have no saved state"


@pytest.mark.parametrize("name", COURSE_NOTEBOOKS)
def test_notebook_renders_to_html_without_a_kernel(name):
    html = render(name)
    assert "<html" in html and "jp-Notebook" in html


def _rows(html: str) -> set[tuple[str, ...]]:
    return {
        tuple(
            unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<td>(.*?)</td>", row)
        )
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, flags=re.S)
    }


def _unfolded(html: str) -> str:
    """What a reader sees before opening any <details> fold."""
    return re.sub(r"<details>.*?</details>", "", html, flags=re.S)


def test_lesson_html_shows_the_race_rules_and_folds_its_answer():
    html = render(LESSON)
    assert 'class="race-fallback"' in html, "the race's static fallback is not in the HTML"
    (fallback,) = re.findall(r'<div class="race-fallback">.*?</details></div>', html, flags=re.S)
    # Readable with no kernel: the rules, open; the results, behind "Answer".
    assert "Total ticks: CPU = 32 × steps, GPU = 40 + steps + 40" in unescape(_unfolded(fallback))
    assert _rows(_unfolded(fallback)) == set()
    (folded,) = re.findall(
        r"<details><summary>Answer[^<]*</summary>(.*?)</details>", fallback, flags=re.S
    )
    rows = _rows(folded)
    assert any(
        row[:3] == ("3", "96 ticks", "83 ticks") and row[3].startswith("GPU")
        for row in rows
        if len(row) >= 4
    ), "the folded table lacks the 3-step row"
    assert any(
        row[:3] == ("2", "64 ticks", "82 ticks") and row[3].startswith("CPU")
        for row in rows
        if len(row) >= 4
    ), "the folded table lacks the 2-step row"


# What the lessons ask learners to predict, as their outputs would answer it. gpu_tensors:
# the dtypes of tensor.py, which tensor sees the change to `a`, the device error, the verdict,
# the size of size.py, the race, the three timings, and the Check yourself questions.
# gpu_training: where the model and the batch are, the `is` tests, the device and dtype
# errors, which lines read on the host, what a read costs, the memory, the checkpoint, and the
# Check yourself answers. gpu_data_loading: the steady states and bottlenecks, pinning without a
# GPU, the sizes of a batch, the normalization's result. gpu_profiling: the first steps'
# times, the steps a schedule records, the tables, the memory, a lane's busy share, the slow
# loop's ranges.
PREDICTION_ANSWERS = (
    "ms a step",
    "steps recorded",
    "Self CPU time total",
    "66.50 KB",
    "ms of ",
    "(measured)",
    "torch.float64 torch.float32",
    "5.0 0.0",
    "RuntimeError",
    "on the expected device",
    "same device",
    "Verdict",
    "faster",
    "0.196608",
    "wins",
    "ticks —",
    "96 ticks",
    "83 ticks",
    "81 ticks",
    "82 ticks",
    "64 ticks",
    "starts winning",
    "without synchronize",
    "0.786432",
    "786,432",
    "786432",
    "0.79 MB",
    "float().to",
    "meta True",
    "cpu True",
    "expected target dtype",
    "reads the value on the host",
    "stays on the device",
    "steps/s",
    "times slower",
    "% slower",
    "times the weights",
    "deserialize",
    "400 MB",
    "300 MB",
    "1,000 times",
    "a batch in steady state",
    "% of the time",
    "bottleneck: ",
    "Cannot access accelerator",
    "MB (counted)",
    "float32 cpu True",
)


def _output_texts(notebook) -> list[str]:
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts = [output.get("text", ""), output.get("evalue", ""), *output.get("traceback", [])]
            for value in output.get("data", {}).values():
                parts.append(value if isinstance(value, str) else json.dumps(value))
            texts.append(_unfolded(unescape("\n".join(parts))))
    return texts


@pytest.mark.parametrize("name", COURSE_NOTEBOOKS)
def test_no_saved_output_answers_a_prediction(root, name):
    """Committed outputs are read before a cell runs: none may answer what the text asks
    the learner to predict, except inside a fold the reader opens."""
    answered = {
        answer
        for text in _output_texts(nbformat.read(root / name, as_version=4))
        for answer in PREDICTION_ANSWERS
        if answer in text
    }
    assert answered == set(), f"{name}: saved outputs answer a prediction: {sorted(answered)}"


def test_the_spoiler_scan_would_catch_the_old_race_output():
    old = (
        '<div class="race-fallback"><p>The GPU wins from 3 steps on.</p><table><tr><td>3</td>'
        "<td>96 ticks</td></tr></table></div>"
    )
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                outputs=[nbformat.v4.new_output("display_data", data={"text/html": old})]
            )
        ]
    )
    assert {"wins", "96 ticks"} <= {
        a for t in _output_texts(notebook) for a in PREDICTION_ANSWERS if a in t
    }


def test_training_lesson_html_shows_what_the_widget_does_and_folds_what_to_look_for():
    html = render("notebooks/gpu_training.ipynb")
    (fallback,) = re.findall(
        r'<div class="training-fallback">.*?</details></div>', html, flags=re.S
    )
    shown = unescape(_unfolded(fallback))
    assert "Read the loss every N steps" in shown and "Batch size" in shown
    assert "Train" in shown and "Stop" in shown and "Predict before you train" in shown
    assert "no queue" not in shown and "steps/s" not in fallback
    (folded,) = re.findall(
        r"<details><summary>What to look for</summary>(.*?)</details>", fallback, flags=re.S
    )
    assert "On a CPU there is no queue" in unescape(folded)


def test_data_loading_lesson_html_shows_the_timelines_controls_and_folds_its_answers():
    html = render("notebooks/gpu_data_loading.ipynb")
    (fallback,) = re.findall(
        r'<div class="pipeline-fallback">.*?</details></div>', html, flags=re.S
    )
    shown = unescape(_unfolded(fallback))
    for control in (
        "Loader workers",
        "Pinned memory",
        "Copy on a side stream",
        "Copied as",
        "Run",
        "Predict before you run it",
    ):
        assert control in shown, control
    assert " ms" not in shown and "%" not in shown
    (folded,) = re.findall(
        r"<details><summary>Answer[^<]*</summary>(.*?)</details>", fallback, flags=re.S
    )
    rows = _rows(folded)
    assert ("0 workers, pageable, float32 (the defaults)", "46.3 ms", "load", "17%") in rows
    # Both routes to a busy GPU that the lesson's answer gives: float32 needs a fourth worker.
    assert ("4 workers, pinned, side stream, float32", "8 ms", "compute", "100%") in rows
    assert ("3 workers, pinned, side stream, uint8", "8 ms", "compute", "100%") in rows


def test_profiling_lesson_html_shows_the_timelines_controls_and_no_trace():
    """The saved lesson shows what the timeline draws and its controls, and no trace: a
    saved trace would be one machine's, and the lesson records the reader's own."""
    html = render("notebooks/gpu_profiling.ipynb")
    (fallback,) = re.findall(r'<div class="trace-fallback">.*?</div>', html, flags=re.S)
    shown = unescape(fallback)
    for control in ("Step", "Lane", "Zoom", "Previous event", "Next event", "Longest gap"):
        assert control in shown, control
    assert "Predict, then look" in shown and "reachable with Tab" in shown
    assert " ms" not in shown and "%" not in shown and "<svg" not in fallback
    assert html.count("<svg") == 0, "the lesson saves no figure of a trace"
