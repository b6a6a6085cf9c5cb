"""The grader's kernel client: jupyter_client's, ready as soon as its kernel answers.

jupyter_client's ``wait_for_ready`` ends by draining IOPub until 0.2 s pass without a
message, and a client without a manager first polls the heartbeat every 0.2 s: fixed
waits of 0.2-0.4 s for every kernel, about a sixth of a submission's grading on two
cores (every submission starts two). ``ReadyClient`` keeps the handshake itself (a
``kernel_info_reply`` on shell, then any IOPub message, which shows the subscription is
live) and drains only what has already come. Nothing later depends on the drain: every
reader of IOPub in the grader (nbclient, the bridge, the test kernel's session) takes
only the messages whose parent is its own request.
"""

from __future__ import annotations

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient

IOPUB_WAIT = 0.2  # s for an IOPub message after the kernel_info reply (jupyter_client's)


class ReadyClient(AsyncKernelClient):
    """An asynchronous kernel client whose ``wait_for_ready`` has no fixed waits."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                pass
            else:
                if msg["msg_type"] == "kernel_info_reply":
                    try:
                        await self.iopub_channel.get_msg(timeout=IOPUB_WAIT)
                    except Empty:
                        pass  # IOPub not subscribed yet: ask again
                    else:
                        self._handle_kernel_info_reply(msg)
                        break
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")
        while True:  # what the handshake left, without waiting for more
            try:
                await self.iopub_channel.get_msg(timeout=0)
            except Empty:
                break
