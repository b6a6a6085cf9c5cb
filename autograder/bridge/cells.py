"""Each cell's text through IPython's input transformers once, not twice.

ipykernel's ``do_execute`` transforms a cell to ask whether it awaits (``should_run_async``)
and, for a cell that does not, calls ``shell.run_cell``, which transforms the same text
again: every cell tokenized twice, about 1 ms of a kernel's CPU a cell, 40 cells a
submission over its two kernels. ``TransformOnce`` hands the second call, for the same
text, the first call's result, once. Nothing runs between the two calls but the parse of
``should_run_async``, so the result is what the second transform would have made.
``forget`` at the start of every execute request: a cell that awaits is transformed once
(run_cell_async is given the result), and what it kept must never answer a later cell,
which may come after code that added a transformer of its own. (While such a cell runs,
its own code asking to transform its own text again would get the kept result: no
course's cell does.)

Both kernels use it (``tests_kernel``, ``student_kernel``). In the student's kernel the
student's code may replace ``shell.transform_cell`` itself: that only changes how their
own cells run, as it would without this.
"""

from __future__ import annotations


class TransformOnce:
    def __init__(self, transform):
        self.transform = transform
        self.kept: tuple[str, str] | None = None

    def __call__(self, cell: str) -> str:
        kept, self.kept = self.kept, None
        if kept is not None and kept[0] == cell:
            return kept[1]
        result = self.transform(cell)
        self.kept = (cell, result)
        return result

    def forget(self) -> None:
        self.kept = None


def transform_once(shell) -> TransformOnce:
    """Put a ``TransformOnce`` in front of ``shell.transform_cell``; return it."""
    once = TransformOnce(shell.transform_cell)
    shell.transform_cell = once
    return once
