"""The student's kernel under ``course-grade``: IPython's kernel, which also answers the
bridge's requests (``autograder.bridge.protocol``) as messages of their own.

A request used to be a silent ``execute_request`` of one line that called
``student_side.serve``: IPython parsed, transformed and compiled that line for every one
of the ~55 calls a submission's tests make, about half of the kernel's CPU time per call.
Now the grader sends a ``protocol.REQUEST_MSG`` on the shell channel, ``{"prompt": ...}``
(the same text an ``input_request`` of the test kernel carries), and this kernel hands it
to ``student_side.serve`` directly. ipykernel sets the request as the parent of what the
call prints or displays (the reply is a ``display_data`` of ``protocol.REPLY_MIME``) and
says idle when it is done; an interrupt raises ``KeyboardInterrupt`` in it. The grader
reads only those (``execute.StudentBridge``), so a call sends nothing else: no busy status
before it and no reply on the shell channel after it (a kernel's busy status and a shell
reply it never read cost the grader and the kernel about 0.3 ms of CPU each, 120 of them
a submission). A kernel that stopped after an interrupt is told by a request sent after
it (``StudentBridge._stop_student``).

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
        prompt = parent.get("content", {}).get("prompt")
        if isinstance(prompt, str):  # else no answer: the grader says the kernel sent none
            student_side.serve(self.shell, prompt)

    def _publish_status(self, status, channel, parent=None) -> None:
        if status == "busy" and self._bridge_call(channel, parent):
            return  # a call says idle when it is done, and nothing before
        super()._publish_status(status, channel, parent)

    def _bridge_call(self, channel, parent) -> bool:
        request = parent if parent is not None else self.get_parent(channel)
        header = request.get("header") if isinstance(request, dict) else None
        return isinstance(header, dict) and header.get("msg_type") == protocol.REQUEST_MSG
