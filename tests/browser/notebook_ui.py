"""What a learner does in JupyterLab, as Playwright steps: open a notebook, wait for
the kernel, run cells, read outputs."""
from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

KERNEL_START_MS = 120_000
RUN_ALL_MS = 240_000


def open_notebook(page: Page, lab, path: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(lab.url(f"lab/tree/{path}"))
    wait_for_idle_kernel(page, KERNEL_START_MS)


def wait_for_idle_kernel(page: Page, timeout_ms: int = RUN_ALL_MS) -> None:
    # The status bar reads "Python 3 (ipykernel) | Idle" once the kernel is ready.
    expect(page.locator(".jp-StatusBar-Widget").get_by_text("| Idle")).to_be_visible(
        timeout=timeout_ms)


def run_all_cells(page: Page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    # Every code cell shows its execution count, e.g. "[7]:", once it has run.
    page.wait_for_function(
        """() => {
          const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
          return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()));
        }""", timeout=RUN_ALL_MS)
    wait_for_idle_kernel(page)


def code_cell(page: Page, text: str) -> Locator:
    """The one code cell whose source contains ``text``."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").filter(
        has=page.locator(".jp-InputArea-editor", has_text=text))
    expect(cell).to_have_count(1)
    return cell


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
        }""", arg=[cell.element_handle(), before], timeout=RUN_ALL_MS)
    wait_for_idle_kernel(page)


def execution_count(cell: Locator) -> str:
    return cell.locator(".jp-InputPrompt").inner_text().strip().strip("[]:")


def error_text(cell: Locator) -> str:
    """The cell's traceback, or "" when it ran without an error."""
    errors = cell.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    texts = [t for t in errors.all_text_contents() if "Traceback" in t or "Error" in t]
    return "\n".join(texts)


def output_text(page: Page) -> str:
    # textContent, not innerText: cells scrolled out of view are not laid out.
    return "\n".join(page.locator(".jp-Notebook .jp-OutputArea-output pre").all_text_contents())
