"""The test kernel under ``course-grade``: IPython's kernel, which reads the student's
answers (``trusted_side.bind``) in the same execute request as the test cell that needs
them.

Reading them was an execute request of its own before each test cell (15 of a
submission's 37 in the test kernel), each parsed, compiled and answered as a cell. Now the
grader puts ``{protocol.BIND_KEY: {"names": [...], "functions": [...]}}`` in a test cell's
request metadata; this kernel binds the answers first, then runs the cell as IPython would.
What binding prints (a warning while decoding, say) is dropped, as it was when binding ran
as a silent cell of its own. If binding raises, the cell does not run, and the reply is an
error with ``protocol.BIND_FAILED`` true: the grader withholds the points and says why (a
key no cell's error has; only the grader's own request and this kernel's code decide it).

The grader reads a test cell's outputs, its idle status and its reply, nothing else
(``trusted_kernel.Session.execute``): this kernel sends no busy status and no
``execute_input`` (the cell's own code, echoed), about 0.3 ms of CPU each on either side,
40 of them a submission.

This process is trusted: it runs the instructor's cells and the grader's code, never a line
of the student's, and sees the student's answers only as plain data (``trusted_side``).
"""

from __future__ import annotations

import contextlib
import io

from ipykernel.ipkernel import IPythonKernel

from autograder.bridge import cells, protocol, trusted_side
from autograder.sandbox.kernel_app import OneShellThread

# IPython's default tracebacks ("Context": every frame's source lines, highlighted with
# pygments) cost a failing test cell about 17 ms of the test kernel's CPU, "Plain" (the
# failing lines and the message, as Python prints them) about 4.5 ms: a class's failing
# tests are many, and a test's traceback shows its assert line either way.
TRACEBACK_MODE = "Plain"


class TestsKernel(OneShellThread, IPythonKernel):
    __test__ = False  # not a pytest test class

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.shell.InteractiveTB.set_mode(mode=TRACEBACK_MODE)
        self.transform = cells.transform_once(self.shell)

    async def do_execute(
        self,
        code,
        silent,
        store_history=True,
        user_expressions=None,
        allow_stdin=False,
        *,
        cell_meta=None,
        cell_id=None,
    ):
        self.transform.forget()
        meta = cell_meta if isinstance(cell_meta, dict) else {}
        with trusted_side.hidden_test(meta.get(protocol.HIDDEN_KEY) is True):
            failed = self._bind(meta.get(protocol.BIND_KEY), allow_stdin)
            if failed is not None:
                return failed
            return await super().do_execute(
                code,
                silent,
                store_history,
                user_expressions,
                allow_stdin,
                cell_meta=cell_meta,
                cell_id=cell_id,
            )

    def _publish_status(self, status, channel, parent=None) -> None:
        if status != "busy":
            super()._publish_status(status, channel, parent)

    def _publish_execute_input(self, code, parent, execution_count) -> None:
        pass

    def _bind(self, wanted, allow_stdin) -> dict | None:
        """Read the answers the request asks for (None: none asked); the error reply if
        reading them failed."""
        if wanted is None:
            return None
        self._allow_stdin = allow_stdin  # binding asks through the stdin channel
        # The kernel's own streams are cut to what the host keeps before they are set
        # aside (bind would otherwise cut the streams it writes to while they are).
        trusted_side.bound_output()
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                trusted_side.bind(self.shell.user_ns, wanted["names"], wanted["functions"])
        except Exception as exc:  # noqa: BLE001 - the grader withholds the points, saying why
            return {
                "status": "error",
                "ename": type(exc).__name__,
                "evalue": trusted_side.said(exc),
                "traceback": [],
                "execution_count": self.execution_count,
                protocol.BIND_FAILED: True,
            }
        return None
