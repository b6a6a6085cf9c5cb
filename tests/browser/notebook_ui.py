"""What a learner does in JupyterLab, as Playwright steps: open a notebook, wait for
the kernel, run cells, read outputs."""

from __future__ import annotations

import uuid

from playwright.sync_api import Locator, Page, expect

KERNEL_START_MS = 120_000
RUN_ALL_MS = 240_000


def open_notebook(page: Page, lab, path: str) -> None:
    """Open ``path`` alone, in a fresh workspace: Lab would otherwise reopen the
    notebooks an earlier test left open, and their cells would mix with these."""
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(lab.url(f"lab/workspaces/{uuid.uuid4().hex}/tree/{path}"))
    wait_for_idle_kernel(page, KERNEL_START_MS)


def wait_for_idle_kernel(page: Page, timeout_ms: int = RUN_ALL_MS) -> None:
    # The status bar reads "Python 3 (ipykernel) | Idle" once the kernel is ready.
    expect(page.locator(".jp-StatusBar-Widget").get_by_text("| Idle")).to_be_visible(
        timeout=timeout_ms
    )


def run_all_cells(page: Page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    # Every code cell shows its execution count, e.g. "[7]:", once it has run.
    page.wait_for_function(
        """() => {
          const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
          return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
        }""",
        timeout=RUN_ALL_MS,
    )
    wait_for_idle_kernel(page)


def code_cell(page: Page, text: str) -> Locator:
    """The one code cell whose source contains ``text``, found by its position so the
    locator still holds after the source is edited."""
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    sources = cells.locator(".jp-InputArea-editor").all_text_contents()
    matches = [index for index, source in enumerate(sources) if text in source]
    assert len(matches) == 1, f"{len(matches)} code cells contain {text!r}"
    return cells.nth(matches[0])


def run_cell(page: Page, cell: Locator) -> None:
    """Select the cell (command mode) and run it with Ctrl+Enter; wait until it has run."""
    before = execution_count(cell)
    cell.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        """([cell, before]) => {
          const m = cell.querySelector('.jp-InputPrompt').textContent.trim().match(/^\\[(\\d+)\\]:$/);
          return m !== null && m[1] !== before;
        }""",
        arg=[cell.element_handle(), before],
        timeout=RUN_ALL_MS,
    )
    wait_for_idle_kernel(page)


def execution_count(cell: Locator) -> str:
    return cell.locator(".jp-InputPrompt").inner_text().strip().strip("[]:")


def error_text(cell: Locator) -> str:
    """What the cell wrote to stderr: its error, if any ("" when it ran cleanly).

    Lab renders errors and stderr alike (one mime type); the course's checks raise
    errors with a one-line message and no "Traceback", so any stderr counts."""
    errors = cell.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    return "\n".join(errors.all_text_contents()).strip()


def output_text(page: Page) -> str:
    # textContent, not innerText: cells scrolled out of view are not laid out.
    return "\n".join(page.locator(".jp-Notebook .jp-OutputArea-output pre").all_text_contents())


WIDGET_MS = 30_000  # a widget's parts render after its box, later still on a loaded machine


def named_slider(page: Page, widget: Locator, name: str) -> Locator:
    """The one slider named ``name`` (``gpucourse.widget_access`` names it after its
    label), waited for; if it never comes, the error says what the widget held instead:
    its sliders with their labels and names, and whether the naming script ran."""
    slider = page.get_by_role("slider", name=name)
    try:
        expect(slider).to_have_count(1, timeout=WIDGET_MS)
    except AssertionError as error:
        seen = widget.evaluate(
            """(box) => ({
              namer_ran: typeof window.gpucourseNameAllSliders === 'function',
              sliders: [...box.querySelectorAll('.gpucourse-slider')].map(s => ({
                label: (s.querySelector('.widget-label') || {}).textContent,
                handle: (s.querySelector('[role="slider"], .ui-slider-handle') || {outerHTML: null}).outerHTML,
              })),
            })"""
        )
        raise AssertionError(f"no slider named {name!r}; the widget held {seen}") from error
    return slider
