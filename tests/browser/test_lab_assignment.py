"""The released assignment in JupyterLab, in a real browser, with nbgrader's extensions."""

from __future__ import annotations

import pytest
from notebook_ui import code_cell, error_text, open_notebook, run_cell
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RELEASE = "release/gpu_tensors/gpu_tensors.ipynb"
CHECKS = "# Checks used by the test cells."
ANSWER = "# Set q2_mb to the size in MB."
VISIBLE_TEST = 'check_number("q2_mb", answer("q2_mb")'
# Check yourself, question 2: a float32 tensor of shape (16, 4096, 3).
Q2_ANSWER = "q2_mb = 16 * 4096 * 3 * 4 / 1_000_000"


def test_an_answer_filled_in_the_browser_passes_its_visible_test(lab, page, artifacts):
    open_notebook(page, lab, RELEASE)
    # nbgrader's lab extension is loaded: its Validate button is in the notebook toolbar.
    expect(
        page.locator(".jp-NotebookPanel-toolbar").get_by_role("button", name="Validate")
    ).to_be_visible()

    run_cell(page, code_cell(page, CHECKS))
    test = code_cell(page, VISIBLE_TEST)
    run_cell(page, test)
    assert "q2_mb" in error_text(test), "the visible test passed before the answer was written"

    answer = code_cell(page, ANSWER)
    answer.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+A")
    page.keyboard.type(Q2_ANSWER)
    expect(answer.locator(".jp-InputArea-editor")).to_contain_text(Q2_ANSWER)
    run_cell(page, answer)
    assert error_text(answer) == ""

    run_cell(page, test)
    assert error_text(test) == "", f"the visible test failed on a right answer:\n{error_text(test)}"
    test.scroll_into_view_if_needed()
    page.screenshot(path=artifacts / "lab-assignment-answered.png")


def test_formgrader_answers_and_lists_the_assignment(lab, page):
    page.goto(lab.url("formgrader"))
    expect(page.get_by_text("Manage Assignments").first).to_be_visible(timeout=60_000)
    expect(page.get_by_role("link", name="gpu_tensors").first).to_be_visible(timeout=60_000)
