"""The grader's end of the bridge stops a student's function that ran out of time, and
knows it stopped only by that call's own reply (attack 33 noted that any earlier call's
reply, still waiting on the shell channel, was taken as proof)."""

from __future__ import annotations

import asyncio
import types

import pytest

from autograder.worker import execute


class Student:
    """A student's kernel seen from the grader: its shell channel holds ``replies``, and
    then nothing more ever comes."""

    def __init__(self, replies: list[str]):
        self.stopped_by = None
        self.shut_down = False
        queue = [{"parent_header": {"msg_id": parent}} for parent in replies]

        async def get_shell_msg():
            if queue:
                return queue.pop(0)
            await asyncio.sleep(3600)

        async def interrupt_kernel():
            pass

        async def shutdown_kernel(now=False):
            self.shut_down = True

        self.kc = types.SimpleNamespace(get_shell_msg=get_shell_msg)
        self.km = types.SimpleNamespace(
            interrupt_kernel=interrupt_kernel, shutdown_kernel=shutdown_kernel
        )

    def student_kernel_stopped(self, where, why=None):
        self.stopped_by = why


@pytest.mark.parametrize(
    "replies, stopped",
    [
        (["earlier-call", "earlier-call-2"], False),  # only old replies: still running
        (["earlier-call", "this-call"], True),
    ],
)
def test_a_function_is_stopped_only_when_its_own_call_replies(monkeypatch, replies, stopped):
    monkeypatch.setattr(execute, "INTERRUPT_GRACE", 0.3)
    student = Student(replies)
    bridge = execute.StudentBridge.__new__(execute.StudentBridge)
    bridge.executor = student
    asyncio.run(bridge._stop_student("this-call"))
    assert student.shut_down is not stopped
    if not stopped:
        assert student.stopped_by == "a function of yours did not stop when its time was up"
