"""nbgrader's Execute, run in the sandbox, with a batch that always goes on.

Three changes to how nbgrader runs a submission, each recorded in ``events_file``:
- the kernel starts under bubblewrap (``SandboxedKernelManager``);
- output past ``Sandbox.max_output_mb`` is dropped with a note, so a 100 MB print costs
  neither the grader's memory nor a 100 MB notebook;
- when the kernel dies (os._exit, a limit breached, killed by the watchdog), nbclient
  raises and nbgrader would drop the whole submission with no grade. Here the cell that
  was running and every cell after it get an error output instead, so the tests that
  never ran score 0 and the rest keep their grades.
"""
from __future__ import annotations

import json

from nbclient.exceptions import DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Unicode

from autograder.kernel import SandboxedKernelManager, read_events, record_event
from autograder.sandbox import Sandbox

TRUNCATED_NOTE = "\n[course-grade: output over {mb} MB dropped]\n"


def error_output(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"{ename}: {evalue}"])


def grade_id(cell: NotebookNode) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


class SandboxedExecute(Execute):
    events_file = Unicode("", help="Where timeouts, deaths and truncations are recorded.").tag(
        config=True
    )

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._stopped_by = ""
        self._output_bytes = 0
        self._output_cap = Sandbox(config=self.config).max_output_mb * 1_000_000
        self._truncated = False
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        runs = cell.cell_type == "code" and cell.source.strip()
        if self._stopped_by:
            if runs:
                cell.outputs = [error_output("KernelDied", f"not run: {self._stopped_by}")]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._stopped_by = self._death_reason()
            record_event(self.events_file, "died", cell=index, grade_id=grade_id(cell),
                         reason=self._stopped_by)
            cell.outputs.append(error_output("KernelDied", self._stopped_by))
            return cell, resources

    def _death_reason(self) -> str:
        for event in reversed(read_events(self.events_file)):
            if event["event"] == "memory":
                return f"killed for memory ({event['rss_mb']} MB > {event['limit_mb']} MB)"
            if event["event"] == "wall":
                return f"killed after {event['limit_s']} s of wall time"
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        return f"the kernel exited (status {code})"

    async def _async_handle_timeout(self, timeout, cell=None):
        record_event(self.events_file, "timeout", grade_id=grade_id(cell) if cell else "",
                     limit_s=timeout)
        return await super()._async_handle_timeout(timeout, cell)

    def output(self, outs, msg, display_id, cell_index):
        size = len(json.dumps(msg.get("content", {})))
        self._output_bytes += size
        if self._output_bytes > self._output_cap:
            if not self._truncated:
                self._truncated = True
                record_event(self.events_file, "output_truncated", cell=cell_index,
                             limit_mb=self._output_cap / 1e6)
                outs.append(NotebookNode(output_type="stream", name="stderr",
                                         text=TRUNCATED_NOTE.format(mb=self._output_cap / 1e6)))
            return None
        return super().output(outs, msg, display_id, cell_index)
