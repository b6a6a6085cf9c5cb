"""The notebook's output allowance: one cap, on every path, for both kernels.

A kernel's output reaches the autograded notebook and the feedback through streams,
displays, display updates, errors, widget messages and the error of an execute reply.
Every one of them is counted against ``Sandbox.max_output_mb`` per notebook; past it,
output is dropped with a note, once per cell. One kind is never dropped: a test cell's
error or stderr output, because nbgrader scores a test cell with no error as passed.
Those are kept, cut to ``VERDICT_CHARS``, so that a flood can neither fill the notebook
nor turn a failed test into a passed one.

Outputs are counted too, ``MAX_OUTPUTS`` a notebook: each costs nbgrader's own steps, the
coordinator and the feedback page some 60 microseconds however small it is, and an outside
attack's 84,000 empty errors (21 bytes each, under the bytes' cap) took nbgrader's steps
5.5 s in the worker, outside every kernel's limits (attack 30).

A display or display update with a ``display_id`` makes nbclient rewrite every output
shown under that id: those rewrites are counted, ``MAX_REWRITES`` a notebook, and past
them such messages are dropped (attack 36: 2,000 displays under one id, then 48,000
updates, took a grading worker 30 CPU s for 10 of the kernel's).
"""

from __future__ import annotations

from nbformat import NotebookNode

from autograder.fates import Event, Kind

TRUNCATED_NOTE = "\n[course-grade: output over {mb:g} MB dropped]\n"
TOO_MANY_NOTE = "\n[course-grade: outputs past the first {n:,} dropped]\n"
MAX_OUTPUTS = 2_000  # a notebook's (the course's solutions make under 100)
MAX_REWRITES = 100_000  # outputs rewritten for display ids (a progress display: one a time)
REWRITES_NOTE = "\n[course-grade: display updates past {n:,} outputs rewritten dropped]\n"
OUTPUT_KINDS = frozenset({"stream", "display_data", "execute_result", "error"})
VERDICT_CHARS = 2000


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(
        output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]
    )


def content_size(content, limit: int = 1 << 31) -> int:
    """About how many bytes a message's content holds, cheaply: its strings, and 8 for
    every other value, containers included (an empty dict costs the grader as much to
    turn into a notebook node as a number does)."""
    stack, size = [content], 0
    while stack and size < limit:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            size += 8 + len(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
            size += 8
        else:
            size += 8
    return size


def bounded_verdict(output: NotebookNode) -> NotebookNode:
    """An error or stderr output, kept whatever the budget (it decides a test's score),
    with its text cut to a size that cannot flood."""
    if output.get("output_type") == "error":
        output["evalue"] = str(output.get("evalue", ""))[:VERDICT_CHARS]
        output["traceback"] = [
            str(line)[:VERDICT_CHARS] for line in output.get("traceback", [])[:40]
        ]
    else:
        output["text"] = str(output.get("text", ""))[:VERDICT_CHARS]
    return output


class OutputBudget:
    """The notebook's output allowance, shared by both kernels' outputs."""

    def __init__(self, limit_bytes: int, events: list, max_outputs: int = MAX_OUTPUTS):
        self.limit, self.used, self.events = limit_bytes, 0, events
        self.max_outputs, self.outputs = max_outputs, 0
        self.noted = False
        self.rewrites, self.rewrites_noted = 0, False
        self.text = TRUNCATED_NOTE.format(mb=limit_bytes / 1e6)

    def allows(self, size: int, output: bool = False) -> bool:
        """Whether a message of ``size`` fits, and, for an output (``output``), whether
        the notebook may hold one more."""
        self.used += size
        self.outputs += output
        if self.used <= self.limit and self.outputs <= self.max_outputs:
            return True
        if not self.noted:
            self.noted = True
            if self.used <= self.limit:
                self.text = TOO_MANY_NOTE.format(n=self.max_outputs)
                self.events.append(
                    Event(Kind.OUTPUT_TRUNCATED, reason="outputs", limit=self.max_outputs)
                )
            else:
                self.events.append(Event(Kind.OUTPUT_TRUNCATED, limit=self.limit / 1e6))
        return False

    def allows_rewrites(self, outputs: list, count: int) -> bool:
        """Whether nbclient may rewrite ``count`` more outputs for a display id; if not, the
        cell's ``outputs`` say so, once."""
        self.rewrites += count
        if self.rewrites <= MAX_REWRITES:
            return True
        if not self.rewrites_noted:
            self.rewrites_noted = True
            self.events.append(
                Event(Kind.OUTPUT_TRUNCATED, reason="display updates", limit=MAX_REWRITES)
            )
        self.note(outputs, REWRITES_NOTE.format(n=MAX_REWRITES))
        return False

    def add(self, outputs: list, output: NotebookNode, size: int) -> None:
        """Keep a test cell's output. An error or stderr output is always kept (bounded):
        dropping it would turn a failed test into a passed one."""
        if self.allows(size, output=True):
            outputs.append(output)
        elif output.get("output_type") == "error" or output.get("name") == "stderr":
            outputs.append(bounded_verdict(output))
            self.note(outputs)
        else:
            self.note(outputs)

    def note(self, outputs: list, text: str = "") -> None:
        """Say once per cell that its output was dropped (``text``: why, if not the
        budget's own words)."""
        text = text or self.text
        if not any(o.get("text") == text for o in outputs):
            outputs.append(NotebookNode(output_type="stream", name="stdout", text=text))
