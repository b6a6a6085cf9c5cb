"""The lesson in JupyterLab, in a real browser: it runs, and the race plays by keyboard."""

from __future__ import annotations

import pytest
from notebook_ui import named_slider, open_notebook, output_text, run_all_cells
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = "notebooks/gpu_tensors.ipynb"
RESULT = "3 steps: CPU 96 ticks, GPU 83 ticks — the GPU wins."
MAX_TABS = 12  # a few controls lie between the race's first control and Run


def test_lesson_runs_and_the_race_is_played_with_the_keyboard(lab, page, artifacts):
    open_notebook(page, lab, LESSON)
    run_all_cells(page)

    tracebacks = page.locator(".jp-Notebook .jp-OutputArea-output").filter(
        has_text="Traceback (most recent call last)"
    )
    expect(tracebacks).to_have_count(0)
    outputs = output_text(page)
    # tensor.py's lines (on this CPU-only machine z stays on the CPU).
    assert "torch.float64 torch.float32\ntorch.Size([2, 3]) cpu" in outputs
    assert "[[ 0.  0.  0.]\n [20. 40.  0.]]" in outputs

    race = page.locator(".race")
    expect(race).to_have_count(1)
    race.scroll_into_view_if_needed()
    # The slider has an accessible name, and Tab reaches it from the race's first control.
    slider = named_slider(page, race, "Steps")
    race.locator("button, [tabindex='0']").first.focus()
    tab_until(page, lambda: slider.evaluate("el => el === document.activeElement"))

    steps = int(float(slider.get_attribute("aria-valuenow")))
    for _ in range(abs(3 - steps)):
        page.keyboard.press("ArrowRight" if steps < 3 else "ArrowLeft")
    expect(slider).to_have_attribute("aria-valuenow", "3.0")
    # The kernel has the new value (the result line says it back) before Run is pressed: on a
    # busy machine the slider's last message can otherwise arrive after the click.
    expect(page.locator(".race-result")).to_have_text(
        "3 steps: predict the winner, then press Run.", timeout=30_000
    )

    tab_until(
        page, lambda: page.evaluate("() => document.activeElement.closest('.race-run') !== null")
    )
    page.keyboard.press("Enter")

    expect(page.locator(".race-result")).to_have_text(RESULT, timeout=30_000)
    for lane, name in [(".race-lane-cpu", "CPU"), (".race-lane-gpu", "GPU")]:
        expect(page.locator(lane)).to_contain_text(name)
        expect(page.locator(lane)).to_contain_text("done")
    expect(page.locator(".race-run")).to_be_enabled()

    race.scroll_into_view_if_needed()
    page.screenshot(path=artifacts / "lab-lesson-race.png")
    race.screenshot(path=artifacts / "lab-lesson-race-widget.png")


def tab_until(page, focused) -> None:
    for _ in range(MAX_TABS):
        if focused():
            return
        page.keyboard.press("Tab")
    assert focused(), f"not reached with {MAX_TABS} presses of Tab"
