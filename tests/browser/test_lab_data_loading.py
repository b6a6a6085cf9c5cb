"""The data loading lesson in JupyterLab, in a real browser: it runs, and its pipeline timeline
is played from the keyboard: workers set, pinned memory and the side stream checked, uint8
chosen, Run pressed."""

from __future__ import annotations

import re

import pytest
from notebook_ui import named_slider, open_notebook, output_text, run_all_cells
from playwright.sync_api import expect
from test_lab_training import focused_in, tab_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = "notebooks/gpu_data_loading.ipynb"


def test_data_loading_lesson_runs_and_the_timeline_is_played_with_the_keyboard(
    lab, page, artifacts
):
    open_notebook(page, lab, LESSON)
    run_all_cells(page)

    tracebacks = page.locator(".jp-Notebook .jp-OutputArea-output").filter(
        has_text="Traceback (most recent call last)"
    )
    expect(tracebacks).to_have_count(0)
    assert "Cannot access accelerator device when none is available." in output_text(page)

    widget = page.locator(".pipeline")
    expect(widget).to_have_count(1)
    widget.scroll_into_view_if_needed()
    workers = named_slider(page, widget, "Loader workers")
    widget.locator("button, input, [tabindex='0']").first.focus()

    tab_until(page, lambda: workers.evaluate("el => el === document.activeElement"))
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    expect(workers).to_have_attribute("aria-valuenow", re.compile(r"^3(\.0)?$"))
    for box in (".pipeline-pinned", ".pipeline-stream"):
        tab_until(page, lambda: focused_in(page, box))  # noqa: B023 - called here, at once
        page.keyboard.press("Space")
        expect(page.locator(f"{box} input")).to_be_checked()
    uint8 = page.locator(".pipeline-dtype button", has_text="uint8")
    tab_until(page, lambda: uint8.evaluate("el => el === document.activeElement"))
    page.keyboard.press("Enter")

    # The kernel has every setting (the status line says them back) before Run is pressed.
    result = page.locator(".pipeline-result")
    expect(result).to_have_text(
        "3 workers, pinned memory, a side stream, copied as uint8: predict "
        "the time per batch and the bottleneck, then press Run.",
        timeout=30_000,
    )
    tab_until(page, lambda: focused_in(page, ".pipeline-run"))
    page.keyboard.press("Enter")
    expect(result).to_contain_text(
        "8 ms a batch in steady state · bottleneck: compute · GPU busy 100%", timeout=30_000
    )
    expect(page.locator(".pipeline-run")).to_be_enabled()
    expect(page.locator(".pipeline-timeline svg")).to_contain_text("load, worker 3")

    widget.scroll_into_view_if_needed()
    page.screenshot(path=artifacts / "lab-data-loading-lesson.png")
    widget.screenshot(path=artifacts / "lab-data-loading-timeline.png")
