"""The profiling lesson in JupyterLab, in a real browser: it runs, and its timeline of the
slow loop's own trace is walked from the keyboard: the next event, the longest gap, a zoom."""

from __future__ import annotations

import re

import pytest
from notebook_ui import named_slider, open_notebook, output_text, run_all_cells
from playwright.sync_api import expect
from test_lab_training import focused_in, tab_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = "notebooks/gpu_profiling.ipynb"


def test_profiling_lesson_runs_and_the_trace_is_walked_with_the_keyboard(lab, page, artifacts):
    open_notebook(page, lab, LESSON)
    run_all_cells(page)

    tracebacks = page.locator(".jp-Notebook .jp-OutputArea-output").filter(
        has_text="Traceback (most recent call last)"
    )
    expect(tracebacks).to_have_count(0)
    assert "steps recorded: [3, 4]" in output_text(page)

    widget = page.locator(".trace")
    expect(widget).to_have_count(1)
    widget.scroll_into_view_if_needed()
    result = page.locator(".trace-result")
    expect(result).to_contain_text("Event 1 of", timeout=30_000)
    zoom = named_slider(page, widget, "Zoom")
    widget.locator("button, select, input, [tabindex='0']").first.focus()

    tab_until(page, lambda: focused_in(page, ".trace-next"))
    page.keyboard.press("Enter")
    expect(result).to_contain_text(
        re.compile(r"Event 2 of \d+: load: a range marked with record_function, on CPU thread 1"),
        timeout=30_000,
    )
    tab_until(page, lambda: focused_in(page, ".trace-gap"))
    page.keyboard.press("Enter")
    expect(result).to_contain_text("Longest gap on CPU thread 1: ", timeout=30_000)

    page.keyboard.press("Shift+Tab")  # back through Next and Previous to the Zoom slider
    tab_back = 0
    while not zoom.evaluate("el => el === document.activeElement") and tab_back < 10:
        page.keyboard.press("Shift+Tab")
        tab_back += 1
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(zoom).to_have_attribute("aria-valuenow", re.compile(r"^4(\.0)?$"))
    expect(page.locator(".trace-timeline svg")).to_contain_text("CPU thread 1: ranges")
    expect(page.locator(".trace-summary table")).to_contain_text("CPU thread 1")

    widget.scroll_into_view_if_needed()
    page.screenshot(path=artifacts / "lab-profiling-lesson.png")
    widget.screenshot(path=artifacts / "lab-profiling-timeline.png")
