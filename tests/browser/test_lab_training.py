"""The training lesson in JupyterLab, in a real browser: it runs, and its widget is played
from the keyboard: both sliders set, Train pressed, Stop pressed."""

from __future__ import annotations

import pytest
from notebook_ui import named_slider, open_notebook, output_text, run_all_cells
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = "notebooks/gpu_training.ipynb"
MAX_TABS = 12  # a few controls lie between the widget's first control and Stop


def focused_in(page, selector: str) -> bool:
    return page.evaluate(
        "(s) => document.activeElement !== null && document.activeElement.closest(s) !== null",
        selector,
    )


def tab_until(page, focused) -> None:
    for _ in range(MAX_TABS):
        if focused():
            return
        page.keyboard.press("Tab")
    assert focused(), f"not reached with {MAX_TABS} presses of Tab"


def test_training_lesson_runs_and_the_widget_is_played_with_the_keyboard(lab, page, artifacts):
    open_notebook(page, lab, LESSON)
    run_all_cells(page)

    tracebacks = page.locator(".jp-Notebook .jp-OutputArea-output").filter(
        has_text="Traceback (most recent call last)"
    )
    expect(tracebacks).to_have_count(0)
    assert "Tensor on device meta is not on the expected device cpu!" in output_text(page)

    widget = page.locator(".training")
    expect(widget).to_have_count(1)
    widget.scroll_into_view_if_needed()
    # Both sliders have accessible names, and Tab reaches them from the widget's first control.
    every = named_slider(page, widget, "Read the loss every N steps")
    batch = named_slider(page, widget, "Batch size")
    widget.locator("button, [tabindex='0']").first.focus()

    tab_until(page, lambda: every.evaluate("el => el === document.activeElement"))
    start = int(float(every.get_attribute("aria-valuenow")))
    for _ in range(start - 1):
        page.keyboard.press("ArrowLeft")
    expect(every).to_have_attribute("aria-valuenow", "1.0")

    tab_until(page, lambda: batch.evaluate("el => el === document.activeElement"))
    page.keyboard.press("ArrowRight")
    expect(page.locator(".training-batch .widget-readout")).to_have_text("128")

    # The kernel has both values (the status line says them back) before Train is pressed.
    status = page.locator(".training-status")
    expect(status).to_have_text(
        "Press Train to train on cpu, reading the loss every step, in batches of 128.",
        timeout=30_000,
    )
    tab_until(page, lambda: focused_in(page, ".training-train"))
    page.keyboard.press("Enter")
    expect(status).to_contain_text("training: step", timeout=30_000)
    expect(status).to_contain_text("measured: ", timeout=30_000)
    expect(page.locator(".training-stop")).to_be_enabled()

    tab_until(page, lambda: focused_in(page, ".training-stop"))
    page.keyboard.press("Enter")
    expect(status).to_contain_text("stopped: step", timeout=30_000)
    expect(page.locator(".training-train")).to_be_enabled()
    expect(page.locator(".training-stop")).to_be_disabled()
    # The measured row of this setting: on cpu, the loss read every step, batches of 128.
    expect(page.locator(".training-speeds")).to_contain_text("cpu")
    row = page.locator(".training-speeds tbody tr").first
    expect(row.locator("td").nth(1)).to_have_text("1")
    expect(row.locator("td").nth(2)).to_have_text("128")
    expect(page.locator(".training-curve svg polyline")).to_have_count(1)

    widget.scroll_into_view_if_needed()
    page.screenshot(path=artifacts / "lab-training-lesson.png")
    widget.screenshot(path=artifacts / "lab-training-widget.png")
