"""The relay between a student's kernel and the grader (``autograder.sandbox.relay``): the grader
never holds more of a kernel's output than it allows, however the kernel sends it, and a
relayed kernel works as any kernel does."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from traitlets.config import Config

from autograder.fates import Kind, kill_reason
from autograder.sandbox.manager import SandboxedKernelManager

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    ),
]
UID = 61991 if os.geteuid() == 0 else -1
# One message of 40 frames of 50 MB (the kernel sends one buffer 40 times, without copies).
MANY_FRAMES = """
k = get_ipython().kernel
b = b"x" * 50_000_000
k.session.send(k.iopub_socket, "display_data", {"data": {}, "metadata": {}}, buffers=[b] * 40)
import time; time.sleep(20)
"""


def _relayed(code: str, timeout: float = 10, sandbox: dict | None = None, **execute):
    """Run ``code`` in a relayed student kernel; (reply or exception, events, the grader's
    peak growth in resident memory in MB, the relay's pid and whether it ran until the
    kernel's shutdown)."""

    async def run():
        config = Config()
        config.SandboxMixin.uid = UID
        root = Path(tempfile.mkdtemp(prefix="cg-", dir="/tmp"))
        root.chmod(0o755)
        config.SandboxMixin.runtime_root = str(root)
        for name, value in (sandbox or {}).items():
            setattr(config.Sandbox, name, value)
        km = SandboxedKernelManager(config=config)
        assert km.relayed  # the student's kernel is read through a relay by default
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        me, peak, stop = psutil.Process(), [], threading.Event()

        def sample():
            while not stop.is_set():
                peak.append(me.memory_info().rss)
                time.sleep(0.02)

        try:
            await kc.wait_for_ready(timeout=60)
            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                reply = await execute.get("drive", _interactive)(km, kc, code, timeout)
            except Exception as exc:  # noqa: BLE001 - what the grader's client would see
                reply = exc
            stop.set()
            sampler.join()
            relay = km._relay
            running = relay.running()
            return reply, list(km.events), (max(peak) - peak[0]) / 1e6, (relay.pid, running)
        finally:
            stop.set()
            kc.stop_channels()
            await km.shutdown_kernel(now=True)
            shutil.rmtree(root, ignore_errors=True)

    return asyncio.run(run())


async def _interactive(km, kc, code, timeout):
    return await kc.execute_interactive(code, timeout=timeout)


def test_a_message_of_many_frames_cuts_the_kernel_off_not_the_grader():
    """zmq holds a whole message before anyone reads it; 40 frames, each under the
    per-frame cap, once put 2 GB into the grader. Now the relay, under its own memory
    limit, takes them and ends; the kernel is killed and its fate says why."""
    reply, events, growth_mb, relay = _relayed(MANY_FRAMES)
    assert isinstance(reply, TimeoutError)  # its output never came
    assert growth_mb < 200, f"the grader grew {growth_mb:.0f} MB"
    floods = [e for e in events if e.kind is Kind.FLOOD]
    assert floods, events
    assert "cut off" in kill_reason(floods[0]) and "iopub" in floods[0].reason
    assert relay[1] is False  # it ended itself: the kernel was cut off


def test_a_message_over_the_cap_in_small_frames_is_not_forwarded():
    """Two frames of 40 MB: each under Sandbox.max_message_mb (64), the message over it."""
    code = MANY_FRAMES.replace('b"x" * 50_000_000', 'b"x" * 40_000_000').replace(
        "[b] * 40", "[b] * 2"
    )
    reply, events, growth_mb, _ = _relayed(code)
    assert isinstance(reply, TimeoutError)
    assert growth_mb < 100, f"the grader grew {growth_mb:.0f} MB"
    floods = [e for e in events if e.kind is Kind.FLOOD]
    assert floods and "a message of 80 MB" in floods[0].reason, events


# Messages addressed to no request: counted by no output or reply bound, parsed all the same.
TO_NO_REQUEST = """
k = get_ipython().kernel
b = b"x" * 5_000_000
for _ in range(40):
    k.session.send(k.iopub_socket, "display_data", {"data": {}, "metadata": {}},
                   parent={"header": {"msg_id": "no-such-request"}}, buffers=[b])
import time; time.sleep(20)
"""


def test_what_a_kernel_sends_in_all_is_bounded_whatever_it_is_addressed_to():
    """Each message well under Sandbox.max_message_mb, addressed to no request: past
    Sandbox.max_sent_mb in all the relay cuts the kernel off (outside attack 70 kept the
    grader parsing 30 MB displays for 25 s)."""
    reply, events, growth_mb, relay = _relayed(TO_NO_REQUEST, sandbox={"max_sent_mb": 50})
    assert isinstance(reply, TimeoutError)
    floods = [e for e in events if e.kind is Kind.FLOOD]
    assert floods and "more than 50 MB in all" in floods[0].reason, events
    assert relay[1] is False
    # Under the bound, the same messages reach the grader and the cell goes on.
    fewer = TO_NO_REQUEST.replace("range(40)", "range(4)").replace("time.sleep(20)", "")
    reply, events, _, relay = _relayed(fewer, sandbox={"max_sent_mb": 50})
    assert reply["content"]["status"] == "ok" and not events and relay[1] is True


def test_a_relayed_kernel_answers_input_and_interrupts():
    """Through the relay: output, a large message under the cap, input on stdin (routed to
    the identity of the shell request) and an interrupt on the control channel."""

    async def drive(km, kc, code, timeout):
        seen = []
        first = kc.execute(
            "big = 'y' * 30_000_000; print(len(big))\n"
            "answer = input('name? ')\nprint('got', answer)",
            allow_stdin=True,
        )
        msg = await kc.get_stdin_msg(timeout=timeout)
        assert msg["content"]["prompt"] == "name? "
        kc.input("ada")
        while True:
            out = await kc.get_iopub_msg(timeout=timeout)
            if out["msg_type"] == "stream":
                seen.append(out["content"]["text"])
            if out["msg_type"] == "status" and out["content"]["execution_state"] == "idle":
                break
        assert (await kc.get_shell_msg(timeout=timeout))["parent_header"]["msg_id"] == first
        second = kc.execute("import time; time.sleep(60)")
        await asyncio.sleep(1)
        await km.interrupt_kernel()
        reply = await kc.get_shell_msg(timeout=10)
        assert reply["parent_header"]["msg_id"] == second
        return "".join(seen), reply["content"].get("ename")

    reply, events, _, relay = _relayed("", drive=drive)
    assert reply == ("30000000\ngot ada\n", "KeyboardInterrupt"), reply
    assert not events
    pid, running = relay
    assert running  # relayed until the kernel's shutdown...
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_relay_holds_its_memory_limit_and_dies_with_the_grader_that_started_it(tmp_path):
    """The relay is forked from the worker's relay server (not from the grader, whose
    memory holds other students' work): it caps its own memory and ties its life to the
    server's, and the server's to the grader's, before it reads anything."""
    import signal
    import subprocess
    import sys

    pidfile = tmp_path / "relay"
    grader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import time
from pathlib import Path
from autograder.sandbox.relay import Relay
relay = Relay(Path({str(tmp_path / "r")!r}), 8_000_000, 64_000_000)
open({str(pidfile)!r}, "w").write(str(relay.pid))
time.sleep(120)
""",
        ],
        cwd=Path(__file__).resolve().parents[2],
    )
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    relay = psutil.Process(int(pidfile.read_text()))
    from autograder.sandbox.relay import memory_limit

    while True:  # it sets its limit at its start
        limits = Path(f"/proc/{relay.pid}/limits").read_text()
        line = next(x for x in limits.splitlines() if x.startswith("Max data size"))
        if line.split()[3] != "unlimited" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert int(line.split()[3]) == memory_limit(8_000_000), line
    server = psutil.Process(relay.ppid())
    assert server.pid != grader.pid and "--serve" in server.cmdline(), server.cmdline()
    assert server.ppid() == grader.pid
    grader.send_signal(signal.SIGKILL)
    grader.wait()
    deadline = time.monotonic() + 5
    while relay.is_running() and relay.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the relay outlived the grader"
        time.sleep(0.05)


def test_a_relay_server_that_was_killed_is_replaced_and_takes_its_relays_with_it(tmp_path):
    """Relays are forked from the worker's relay server; one that died (killed) takes
    its relays with it, and the next relay comes from a new server."""
    import signal

    from autograder.sandbox.relay import Relay

    first = Relay(tmp_path / "a", 8_000_000, 64_000_000)
    server = psutil.Process(psutil.Process(first.pid).ppid())
    assert "--serve" in server.cmdline() and server.ppid() == os.getpid()
    server.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 5
    while first.running():
        assert time.monotonic() < deadline, "a relay outlived its server"
        time.sleep(0.02)
    assert first.ended() is not None  # its kernel would be cut off, and say so
    second = Relay(tmp_path / "b", 8_000_000, 64_000_000)
    try:
        assert psutil.Process(second.pid).ppid() not in (server.pid, os.getpid())
        assert second.running()
    finally:
        first.stop()
        second.stop()
    assert not second.running()
