"""Feedback without the hidden tests, and without anything a browser would run.

nbgrader's autograde puts every test cell back from the gradebook, hidden tests and all,
and ``generate_feedback`` renders them (nbgrader issues 917, 1363). A traceback is no
better: IPython prints the failing line and its neighbours. ``HideHiddenTests`` runs
inside ``generate_feedback`` (added through ``GenerateFeedback.preprocessors``) and, in
every cell that holds a hidden-test region, removes the region's source and reduces the
outputs to pass, or fail with the exception's name and message.

Everything else in the page is the student's: markdown, HTML outputs, SVG, JavaScript,
widget state. An instructor who opens the page from the Jupyter server would run any
script in it with the server's origin. So the page is sanitized twice, with nbconvert's
own parts: the ``SanitizeHTML`` preprocessor (bleach) keeps only safe output types and
cleans markdown and HTML, and ``HTMLExporter.sanitize_html`` cleans what markdown
rendering makes (bleach again: no scripts, no event handlers, no ``javascript:`` URLs).
"""
from __future__ import annotations

from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests

HIDDEN_NOTE = "# (hidden tests: their code is not shown)"


class HideHiddenTests(ClearHiddenTests):
    """Removes hidden-test source and reduces those cells' outputs to pass/fail + message."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code" or self.begin_test_delimeter not in cell.source:
            return cell, resources
        self._hide_region(cell)
        cell.outputs = self._verdict(cell.get("outputs", []))
        return cell, resources

    def _hide_region(self, cell: NotebookNode) -> None:
        source = cell.source
        try:
            self._remove_hidden_test_region(cell)
        except RuntimeError:
            # An unterminated region (a tampered cell): hide everything after its start.
            cell.source = source.split(self.begin_test_delimeter, 1)[0].rsplit("\n", 1)[0]
        cell.source = (cell.source.rstrip() + "\n" + HIDDEN_NOTE).lstrip("\n")

    @staticmethod
    def _verdict(outputs: list) -> list:
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if not errors:
            return [NotebookNode(output_type="stream", name="stdout", text="Tests passed.\n")]
        first = errors[0]
        message = f"{first.get('ename', 'Error')}: {first.get('evalue', '')}".rstrip(": ")
        return [NotebookNode(output_type="error", ename=first.get("ename", "Error"),
                             evalue=first.get("evalue", ""),
                             traceback=[f"Test failed. {message}"])]


def feedback_preprocessors() -> list:
    """GenerateFeedback's default list with HideHiddenTests and SanitizeHTML first."""
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.converters import GenerateFeedback

    defaults = list(GenerateFeedback.class_traits()["preprocessors"].default())
    return [HideHiddenTests, SanitizeHTML, *defaults]
