"""The student's kernel under ``course-grade``: IPython's kernel, which also answers the
bridge's requests (``autograder.bridge.protocol``) as messages of their own.

A request used to be a silent ``execute_request`` of one line that called
``student_side.serve``: IPython parsed, transformed and compiled that line for every one
of the ~55 calls a submission's tests make, about half of the kernel's CPU time per call.
Now the grader sends a ``protocol.REQUEST_MSG`` on the shell channel, ``{"prompt": ...}``
(the same text an ``input_request`` of the test kernel carries), and this kernel hands it
to ``student_side.serve`` directly. Everything else is as for any message: ipykernel sets
the request as the parent of what the call prints or displays (the reply is a
``display_data`` of ``protocol.REPLY_MIME``), says busy and idle around it, and an
interrupt raises ``KeyboardInterrupt`` in it. The handler then sends a
``protocol.REPLY_MSG`` on the shell channel, as an execute request's reply would come,
so that the grader can tell a kernel that stopped after an interrupt.

As for ``student_side``: the student's notebook runs in this process first and may replace
any of it; it can only state answers (see ``student_side``'s docstring). Nothing here runs
on the grader's side, and the grader parses nothing a request's reply says but the reply
text itself, with the same bounds as before.
"""

from __future__ import annotations

from ipykernel.ipkernel import IPythonKernel

from autograder.bridge import cells, protocol, student_side
from autograder.sandbox.kernel_app import OneShellThread


class BridgeKernel(OneShellThread, IPythonKernel):
    msg_types = [*IPythonKernel.msg_types, protocol.REQUEST_MSG]

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.transform = cells.transform_once(self.shell)

    async def do_execute(self, *args, **kwargs):
        self.transform.forget()
        return await super().do_execute(*args, **kwargs)

    async def course_grade_request(self, stream, ident, parent) -> None:
        status = "error"
        try:
            prompt = parent.get("content", {}).get("prompt")
            if isinstance(prompt, str):
                student_side.serve(self.shell, prompt)
                status = "ok"
        finally:
            self.session.send(stream, protocol.REPLY_MSG, {"status": status}, parent, ident)
