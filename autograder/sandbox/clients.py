"""The grader's kernel client: jupyter_client's, ready as soon as its kernel answers.

jupyter_client's ``wait_for_ready`` ends by draining IOPub until 0.2 s pass without a
message, and a client without a manager first polls the heartbeat every 0.2 s: fixed
waits of 0.2-0.4 s for every kernel, about a sixth of a submission's grading on two
cores (every submission starts two). ``ReadyClient`` keeps the handshake itself (a
``kernel_info_reply`` on shell, then IOPub read up to the request's own ``idle`` status,
which shows the subscription is live) and so ends with nothing of the handshake left
unread, without waiting for silence. A request whose IOPub stays silent for
``IOPUB_WAIT`` s (the subscription was not live yet) is asked again.

``take`` reads a message a channel already holds without polling for it first:
jupyter_client's ``get_msg`` polls before every receive, and pyzmq's asyncio poll costs
more than the receive; the grader reads about 400 messages a submission, most of them
already queued behind the one it waited for.

No heartbeat. jupyter_client's heartbeat is a thread that pings the kernel, and
``stop_channels`` joins it. On the grader's sockets, which never reconnect
(``guarded_context``), a ping sent once the kernel's relay has ended waits for good, and
so does the join: a worker hung so in CI (0.17.4). (A stop that comes before the thread
has begun leaves it looping, too.) The grader knows whether a kernel lives from its
process: the manager's (``parent``), or ``alive``, a check its maker gives a client
without a manager.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from queue import Empty

import zmq
from jupyter_client.asynchronous import AsyncKernelClient

IOPUB_WAIT = 0.2  # s of IOPub silence after a kernel_info reply: not subscribed yet


class ReadyClient(AsyncKernelClient):
    """An asynchronous kernel client whose ``wait_for_ready`` has no fixed waits, and
    that starts no heartbeat thread."""

    alive: Callable[[], bool] | None = None  # where there is no manager to ask

    def start_channels(self, shell=True, iopub=True, stdin=True, hb=False, control=True):
        super().start_channels(shell=shell, iopub=iopub, stdin=stdin, hb=False, control=control)

    async def _async_is_alive(self) -> bool:
        if self.alive is not None:
            return self.alive()
        return await super()._async_is_alive()

    is_alive = _async_is_alive  # jupyter_client binds its own to the base's coroutine

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                pass
            else:
                if msg["msg_type"] == "kernel_info_reply" and await self._idle_after(msg):
                    self._handle_kernel_info_reply(msg)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")

    async def _idle_after(self, reply: dict) -> bool:
        """Read IOPub up to the idle status of the request ``reply`` answers: True once it
        came, False if IOPub stayed silent for ``IOPUB_WAIT`` s first."""
        request = reply.get("parent_header", {}).get("msg_id")
        while True:
            try:
                msg = await self.iopub_channel.get_msg(timeout=IOPUB_WAIT)
            except Empty:
                return False
            if (
                msg["msg_type"] == "status"
                and msg.get("parent_header", {}).get("msg_id") == request
                and msg["content"].get("execution_state") == "idle"
            ):
                return True


async def take(channel) -> dict | None:
    """The next message ``channel`` holds now, parsed by its session (which checks its
    signature and bounds it, as ``get_msg`` does), or None when none has come."""
    try:
        frames = await channel.socket.recv_multipart(zmq.NOBLOCK)
    except zmq.Again:
        return None
    _, message = channel.session.feed_identities(frames)
    return channel.session.deserialize(message)
