"""The grader's end of the bridge stops a student's function that ran out of time, and
knows it stopped only by the reply to a request sent after the interrupt, with an id no
kernel can guess (attack 33 noted that any earlier call's reply, still waiting on the
shell channel, was taken as proof; attack 35 that a function could send its own call's
reply ahead, ignore the interrupt and go on)."""

from __future__ import annotations

import asyncio
import types

import pytest
from jupyter_client.session import Session

from autograder.worker import execute

PROOF = "(the reply to the grader's request after the interrupt)"


class Student:
    """A student's kernel seen from the grader: its shell channel holds ``replies``, and
    then nothing more ever comes."""

    def __init__(self, replies: list[str]):
        self.stopped_by = None
        self.shut_down = False
        self.sent: list[dict] = []
        queue = [{"parent_header": {"msg_id": parent}} for parent in replies]

        def send(msg):  # a kernel that answers takes the request's id from it
            self.sent.append(msg)
            for reply in queue:
                if reply["parent_header"]["msg_id"] == PROOF:
                    reply["parent_header"]["msg_id"] = msg["header"]["msg_id"]

        async def get_shell_msg():
            if queue:
                return queue.pop(0)
            await asyncio.sleep(3600)

        async def interrupt_kernel():
            pass

        async def shutdown_kernel(now=False):
            self.shut_down = True

        self.kc = types.SimpleNamespace(
            get_shell_msg=get_shell_msg,
            session=Session(key=b"k"),
            shell_channel=types.SimpleNamespace(send=send),
        )
        self.km = types.SimpleNamespace(
            interrupt_kernel=interrupt_kernel, shutdown_kernel=shutdown_kernel
        )

    def student_kernel_stopped(self, where, why=None):
        self.stopped_by = why


@pytest.mark.parametrize(
    "replies, stopped",
    [
        (["earlier-call", "earlier-call-2"], False),  # only old replies: still running
        # The call's own reply, which the kernel may have sent itself before it went on:
        (["earlier-call", "this-call"], False),
        (["earlier-call", "this-call", PROOF], True),
    ],
)
def test_a_function_is_stopped_only_when_a_request_after_the_interrupt_is_answered(
    monkeypatch, replies, stopped
):
    monkeypatch.setattr(execute, "INTERRUPT_GRACE", 0.3)
    student = Student(replies)
    bridge = execute.StudentBridge.__new__(execute.StudentBridge)
    bridge.executor = student
    asyncio.run(bridge._stop_student())
    assert student.shut_down is not stopped
    (proof,) = student.sent
    assert proof["header"]["msg_type"] == "kernel_info_request"
    # Not the session's own next id, which a kernel can work out from the ones it saw:
    assert not proof["header"]["msg_id"].startswith(student.kc.session.session)
    if not stopped:
        assert student.stopped_by == "a function of yours did not stop when its time was up"
