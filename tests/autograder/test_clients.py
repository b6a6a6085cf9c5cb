"""The grader's kernel client is ready as soon as its kernel has answered: no fixed wait
after the handshake (jupyter_client's drains IOPub until 0.2 s pass in silence)."""

import asyncio
from queue import Empty

import pytest

from autograder.sandbox.clients import ReadyClient


class Channel:
    """A channel that hands out ``messages`` and records the timeout of each get."""

    def __init__(self, messages):
        self.messages, self.timeouts = list(messages), []

    async def get_msg(self, timeout=None):
        self.timeouts.append(timeout)
        message = self.messages.pop(0) if self.messages else None
        if message is None:  # nothing (yet)
            raise Empty
        return message


def client(shell, iopub, alive=True) -> ReadyClient:
    kc = ReadyClient()
    kc._shell_channel, kc._iopub_channel = Channel(shell), Channel(iopub)
    kc.kernel_info = lambda: None

    async def is_alive():
        return alive

    kc._async_is_alive = is_alive
    kc._handle_kernel_info_reply = lambda msg: None
    return kc


REPLY = {"msg_type": "kernel_info_reply", "content": {}}
STATUS = {"msg_type": "status", "content": {"execution_state": "busy"}}


def test_ready_after_the_handshake_without_waiting_for_silence():
    kc = client([REPLY], [STATUS, STATUS, STATUS])
    asyncio.run(kc.wait_for_ready(timeout=5))
    # One wait for proof that IOPub is live, then only what had already come.
    assert kc.iopub_channel.timeouts[0] > 0
    assert kc.iopub_channel.timeouts[1:] == [0, 0, 0]


def test_asks_again_until_iopub_is_live():
    kc = client([REPLY, REPLY], [None, STATUS])  # the first reply came before IOPub was live
    asyncio.run(kc.wait_for_ready(timeout=5))
    assert kc.shell_channel.timeouts == [1, 1]


def test_a_dead_kernel_is_said():
    kc = client([], [], alive=False)
    with pytest.raises(RuntimeError, match="died"):
        asyncio.run(kc.wait_for_ready(timeout=5))
