"""Static renderers (GitHub, nbviewer, nbconvert): the notebooks are valid, any saved
widget state has the shape GitHub needs, and the lesson shows its race without a kernel."""
from __future__ import annotations

import re
from functools import lru_cache
from html import unescape
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
COURSE_NOTEBOOKS = sorted(
    path.relative_to(ROOT).as_posix()
    for pattern in ["notebooks/*.ipynb", "source/*/*.ipynb", "release/*/*.ipynb"]
    for path in ROOT.glob(pattern))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LESSON = "notebooks/gpu_tensors.ipynb"


@lru_cache(maxsize=None)
def render(name: str) -> str:
    """The notebook as nbconvert's HTML, from its saved outputs only: no kernel runs."""
    html, _ = exporter().from_notebook_node(nbformat.read(ROOT / name, as_version=4))
    return html


@lru_cache(maxsize=None)
def exporter() -> HTMLExporter:
    return HTMLExporter()


def test_the_course_notebooks_are_all_here():
    for name in [LESSON, "source/gpu_tensors/gpu_tensors.ipynb",
                 "release/gpu_tensors/gpu_tensors.ipynb"]:
        assert name in COURSE_NOTEBOOKS, f"{name} is missing"


@pytest.mark.parametrize("name", COURSE_NOTEBOOKS)
def test_notebook_validates_with_nbformat(root, name):
    notebook = nbformat.read(root / name, as_version=nbformat.NO_CONVERT)
    assert notebook.nbformat == 4
    nbformat.validate(notebook)  # raises ValidationError with the offending path


@pytest.mark.parametrize("name", COURSE_NOTEBOOKS)
def test_saved_widget_state_has_the_shape_github_needs(root, name):
    notebook = nbformat.read(root / name, as_version=4)
    views = {output["data"][WIDGET_VIEW]["model_id"]
             for cell in notebook.cells if cell.cell_type == "code"
             for output in cell.outputs if WIDGET_VIEW in output.get("data", {})}
    widgets = notebook.metadata.get("widgets")
    if widgets is None:
        assert not views, (f"{name}: outputs show widgets {sorted(views)} but no widget state "
                           "is saved; GitHub shows an error instead of the notebook")
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


def test_lesson_html_shows_the_race_fallback():
    html = render(LESSON)
    assert 'class="race-fallback"' in html, "the race's static fallback is not in the HTML"
    rows = {tuple(unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in
                  re.findall(r"<td>(.*?)</td>", row))
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, flags=re.S)}
    # The seed's answer, readable with no kernel: 3 steps, CPU 96 ticks, GPU 83, GPU wins.
    assert any(row[:3] == ("3", "96 ticks", "83 ticks") and row[3].startswith("GPU")
               for row in rows if len(row) >= 4), "the fallback table lacks the 3-step row"
    assert any(row[:3] == ("2", "64 ticks", "82 ticks") and row[3].startswith("CPU")
               for row in rows if len(row) >= 4), "the fallback table lacks the 2-step row"
