"""The grader's kernel client is ready as soon as its kernel has answered: it reads the
handshake's own messages to their end and never waits for silence (jupyter_client's
drains IOPub until 0.2 s pass without a message)."""

import asyncio
from queue import Empty

import pytest

from autograder.sandbox.clients import IOPUB_WAIT, ReadyClient

CHANNELS = ("shell", "iopub", "stdin", "control", "hb")


class Channel:
    """A channel that hands out ``messages`` (None: nothing came in time) and records the
    timeout of each get."""

    def __init__(self, messages):
        self.messages, self.timeouts = list(messages), []

    async def get_msg(self, timeout=None):
        self.timeouts.append(timeout)
        message = self.messages.pop(0) if self.messages else None
        if message is None:
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


def reply(request: str) -> dict:
    return {"msg_type": "kernel_info_reply", "parent_header": {"msg_id": request}, "content": {}}


def status(request: str, state: str) -> dict:
    return {
        "msg_type": "status",
        "parent_header": {"msg_id": request},
        "content": {"execution_state": state},
    }


def test_ready_at_the_handshakes_idle_with_nothing_of_it_left_unread():
    later = status("a cell", "busy")
    kc = client([reply("k1")], [status("k1", "busy"), status("k1", "idle"), later])
    asyncio.run(kc.wait_for_ready(timeout=5))
    # The idle of its own request ends it: what comes after is the next request's.
    assert kc.iopub_channel.messages == [later]
    assert kc.iopub_channel.timeouts == [IOPUB_WAIT, IOPUB_WAIT]


def test_asks_again_until_iopub_is_live():
    # The first request's status went out before IOPub was subscribed: silence, ask again.
    kc = client([reply("k1"), reply("k2")], [None, status("k2", "busy"), status("k2", "idle")])
    asyncio.run(kc.wait_for_ready(timeout=5))
    assert kc.shell_channel.timeouts == [1, 1]
    assert kc.iopub_channel.messages == []


def test_a_dead_kernel_is_said():
    kc = client([], [], alive=False)
    with pytest.raises(RuntimeError, match="died"):
        asyncio.run(kc.wait_for_ready(timeout=5))


def test_take_reads_what_a_channel_holds_through_its_session_and_never_waits():
    """``take``: a queued message parsed (its signature checked, as get_msg does), None at
    once when nothing came, and a forged signature refused."""
    import zmq
    import zmq.asyncio
    from jupyter_client.channels import AsyncZMQSocketChannel

    from autograder.sandbox.clients import take
    from autograder.sandbox.messages import BoundedSession

    async def run():
        context = zmq.asyncio.Context()
        sender, receiver = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        port = sender.bind_to_random_port("tcp://127.0.0.1")
        receiver.connect(f"tcp://127.0.0.1:{port}")
        session = BoundedSession(key=b"secret")
        channel = AsyncZMQSocketChannel(receiver, session)
        try:
            assert await take(channel) is None  # nothing yet: no wait
            session.send(sender, "status", {"execution_state": "idle"})
            forged = BoundedSession(key=b"not the key")
            forged.send(sender, "status", {"execution_state": "busy"})
            await receiver.poll(5000)
            got = await take(channel)
            assert (got["msg_type"], got["content"]) == ("status", {"execution_state": "idle"})
            await receiver.poll(5000)
            with pytest.raises(ValueError, match="Invalid Signature"):
                await take(channel)
            assert await take(channel) is None
        finally:
            sender.close(0)
            receiver.close(0)
            context.term()

    asyncio.run(run())


@pytest.mark.timeout(30)
def test_a_call_whose_kernel_never_stops_sending_still_ends_at_its_time_limit():
    """The bridge reads what IOPub already holds without waiting, so without a yield of its
    own a kernel that prints without end (and the grader keeping up) would keep the call's
    time limit from ever ending it (a CI run hung 10 minutes on such a mistake)."""
    import types

    from autograder.worker.execute import StudentBridge

    class Flood:
        def recv_multipart(self, flags=0):
            ready = asyncio.get_running_loop().create_future()
            ready.set_result([b"frame"])
            return ready

    class Session:
        def feed_identities(self, frames):
            return [], frames

        def deserialize(self, frames):
            return {"msg_type": "stream", "parent_header": {"msg_id": "an earlier cell"}}

    async def alive():
        return True

    kc = types.SimpleNamespace(
        iopub_channel=types.SimpleNamespace(socket=Flood(), session=Session())
    )
    bridge = object.__new__(StudentBridge)
    bridge.executor = types.SimpleNamespace(km=types.SimpleNamespace(is_alive=alive))
    bridge.replies_left, bridge.max_chars = 10**9, 10**6

    async def call():
        await asyncio.wait_for(bridge._reply(kc, "this call"), timeout=0.2)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(call())


def test_starts_no_heartbeat_thread_so_a_stop_at_once_cannot_hang():
    """jupyter_client's heartbeat thread pings on the grader's sockets, which never
    reconnect: once a kernel's relay ended, a ping waited for good, and ``stop_channels``
    joined that thread (a CI run hung 9 minutes in that join); a stop before the thread
    began left it looping. The grader's clients start no heartbeat."""
    import threading

    ports = {f"{name}_port": 40000 + i for i, name in enumerate(CHANNELS)}
    before = threading.active_count()
    for _ in range(20):
        kc = ReadyClient()
        kc.load_connection_info({"ip": "127.0.0.1", "transport": "tcp", "key": b"", **ports})
        kc.start_channels()
        assert kc._hb_channel is None
        assert threading.active_count() == before
        kc.stop_channels()
    assert threading.active_count() == before


def test_a_client_without_a_manager_asks_its_makers_check_whether_the_kernel_lives():
    """The forked test kernel's client has no manager (and no heartbeat): its maker's
    ``alive`` says the kernel died, at once rather than at the startup limit."""
    kc = ReadyClient()
    kc._shell_channel, kc._iopub_channel = Channel([]), Channel([])
    kc.kernel_info = lambda: None
    kc.alive = lambda: False
    with pytest.raises(RuntimeError, match="died"):
        asyncio.run(kc.wait_for_ready(timeout=60))
    assert kc.shell_channel.timeouts == [1]
    kc.alive = lambda: True
    assert asyncio.run(kc.is_alive()) is True
