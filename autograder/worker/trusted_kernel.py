"""The trusted test kernel: runs every test cell, hidden tests included, and nothing else.

Each submission gets a fresh test kernel, forked from a template that never ran a cell
(``autograder.sandbox.kernel_template``): no process ever holds two submissions' data, yet no
submission pays again for starting Python, ipykernel and torch. One template per grading
thread, assignment and test uid, in the test kernel's sandbox, with its limits; it is
replaced whenever it died and after any problem, and a problem while a template that had
served before was in use is retried once on a fresh one by the worker, so a worn
template never costs a student a point.

Everything here raises ``TrustedKernelProblem`` when the test kernel cannot do its part:
the submission's test points are then withheld, and its fate says why.
"""

from __future__ import annotations

import ast
import asyncio
import json
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import zmq
import zmq.asyncio
from nbformat.v4 import new_output, output_from_msg

from autograder import fates
from autograder.bridge import protocol, trusted_side
from autograder.sandbox.bubblewrap import Sandbox
from autograder.sandbox.clients import ReadyClient, take
from autograder.sandbox.kernel_entry import UNSAFE_TO_FORK
from autograder.sandbox.manager import (
    SOCKETS_IN_SANDBOX,
    SandboxedKernelManager,
    discard,
    guarded_context,
    is_running,
)
from autograder.sandbox.messages import BoundedSession
from autograder.worker import tmpdirs
from autograder.worker.outputs import content_size

STARTUP_TIMEOUT = 60
OUTPUT_MSGS = ("stream", "display_data", "execute_result", "error")
DRAIN = 64  # messages read from a channel for one poll
_TEMPLATES: dict = {}


class TrustedKernelProblem(Exception):
    """The test kernel could not finish its part; the tests' points are withheld."""

    __test__ = False  # not a pytest test class


class TemplateUnusable(Exception):
    """No template can serve here (it would not start, or forking it is not safe): test
    kernels start as any kernel, and each submission's details say so."""


def template(config, staging: Path, uid: int, slot: int = 0) -> TrustedKernel:
    """The test-kernel template of one grading thread (``slot``) for ``staging`` (the
    assignment's test files), run as ``uid``."""
    key = (str(staging), uid, slot)
    if key not in _TEMPLATES:
        _TEMPLATES[key] = TrustedKernel(config, staging, uid)
    return _TEMPLATES[key]


def close(staging: Path, uid: int, slot: int = 0) -> None:
    kernel = _TEMPLATES.pop((str(staging), uid, slot), None)
    if kernel is not None:
        kernel.close()


def close_all() -> None:
    for kernel in _TEMPLATES.values():
        kernel.close()
    _TEMPLATES.clear()


class TrustedKernel:
    """A template that forks one test kernel per submission (``session``)."""

    __test__ = False  # not a pytest test class

    def __init__(self, config, staging: Path, uid: int):
        self.config, self.staging, self.uid = config, Path(staging), uid
        self.km: SandboxedKernelManager | None = None
        self.uses = 0  # submissions its children served
        self.starts = 0  # templates started
        self.start_seconds = 0.0  # spent starting templates, not yet told (take_start_seconds)
        self.forks = 0  # kernels forked, over all its templates (each gets new ports)
        self.folder: Path | None = None
        self.forked: list = []  # the processes of the kernel forked last
        # Why test kernels start without a template here (None: they are forked).
        self.without_template: str | None = (
            None
            if Sandbox(config=config).kernel_templates
            else "kernel templates are turned off (Sandbox.kernel_templates)"
        )

    @property
    def reused(self) -> bool:
        return self.km is not None and self.uses > 0

    async def session(self, plan, cell_timeout: float, budget) -> Session:
        """A fresh test kernel for one submission: forked from the template, or, where no
        template can serve (``without_template`` says why), started as any kernel."""
        if self.without_template is None:
            try:
                return await self._forked_session(plan, cell_timeout, budget)
            except TemplateUnusable as exc:
                self.close()
                self.without_template = str(exc)
        return await self._started_session(plan, cell_timeout, budget)

    async def _forked_session(self, plan, cell_timeout: float, budget) -> Session:
        if self.km is not None and not await self.km.is_alive():
            self.close()
        if self.km is None:
            await self._start(template=True)
        self.uses += 1
        self.km.restart_wall_clock()
        connection = self._connection()
        try:
            ip = await self.km.fork_kernel(connection)
        except Exception as exc:  # noqa: BLE001
            status = self.km.provisioner.process.poll() if self.km.provisioner else None
            self.close()
            if status == UNSAFE_TO_FORK:
                raise TemplateUnusable(
                    "its template had more than one thread, and forking it would not be safe"
                ) from None
            raise TrustedKernelProblem(f"the test kernel could not start ({exc})") from None
        self.forked = self.km.forked_kernels()  # looked up once: alive() runs per message
        max_bytes = Sandbox(config=self.config).max_message_mb * 1_000_000
        kc = ReadyClient(context=guarded_context(max_bytes, True), session=BoundedSession())
        kc.load_connection_info({**connection, "ip": ip})
        kc.alive = self.alive  # no manager of its own: its template's and its fork's processes
        return await self._ready(Session(self, kc, plan, cell_timeout, budget))

    async def _started_session(self, plan, cell_timeout: float, budget) -> Session:
        """A test kernel started as any kernel (no template): closed with its session."""
        self.close()
        await self._start(template=False)
        self.uses += 1
        self.forked = []
        return await self._ready(Session(self, self.km.client(), plan, cell_timeout, budget))

    async def _ready(self, session: Session) -> Session:
        session.kc.start_channels()
        try:
            await session.kc.wait_for_ready(timeout=STARTUP_TIMEOUT)
        except Exception as exc:  # noqa: BLE001
            session.end()
            raise TrustedKernelProblem(f"the test kernel did not answer ({exc})") from None
        return session

    def _connection(self) -> dict:
        """New ports (ipc: numbers in the socket files' names) and a new key per kernel."""
        self.forks += 1
        base = 10 * self.forks
        ports = {
            name: base + i
            for i, name in enumerate(
                ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"), start=1
            )
        }
        return {
            **ports,
            "transport": "ipc",
            "ip": SOCKETS_IN_SANDBOX,
            "key": secrets.token_hex(32),
            "signature_scheme": "hmac-sha256",
            "kernel_name": "",
        }

    def take_start_seconds(self) -> float:
        """Seconds spent starting templates since the last call (for the run's steps)."""
        spent, self.start_seconds = self.start_seconds, 0.0
        return spent

    async def _start(self, template: bool) -> None:
        started = time.monotonic()
        self.folder = tmpdirs.make("cg-test-")
        self.folder.chmod(0o755)
        km = SandboxedKernelManager(config=self.config)
        km.uid, km.runtime_root, km.staging = self.uid, str(self.folder), str(self.staging)
        km.template = "test" if template else ""
        km.trusted = True
        try:
            # (A template's children are made test kernels by the template itself.)
            await km.start_kernel(extra_arguments=[protocol.TESTS_KERNEL_OPTION])
        except Exception as exc:  # noqa: BLE001
            shutil.rmtree(self.folder, ignore_errors=True)
            if template:
                raise TemplateUnusable(f"its template could not start ({exc})") from None
            raise TrustedKernelProblem(f"the test kernel could not start ({exc})") from None
        self.km, self.uses = km, 0
        self.starts += 1
        if template:
            self.start_seconds += time.monotonic() - started

    def alive(self) -> bool:
        """Whether the test kernel still runs (a forked one: and its template)."""
        km = self.km
        if km is None or km.provisioner is None or km.provisioner.process.poll() is not None:
            return False
        return not km.template or any(is_running(p) for p in self.forked)

    def close(self) -> None:
        km, folder, self.km, self.folder = self.km, self.folder, None, None
        discard(km, folder)


@dataclass
class Session:
    """One submission's use of the test kernel."""

    kernel: TrustedKernel
    kc: object
    plan: object
    cell_timeout: float
    budget: object  # outputs.OutputBudget, shared with the student's kernel's outputs
    done: set = field(default_factory=set)
    last_reply: dict | None = None

    def end(self) -> None:
        """Stop talking to this submission's test kernel and kill it: the next one is a
        new fork."""
        try:
            self.kc.stop_channels()
        except Exception:  # noqa: BLE001 - it goes either way
            pass
        if self.kernel.km is not None and self.kernel.km.template:
            self.kernel.km.end_forked_kernels()
        elif self.kernel.km is not None:
            self.kernel.close()  # a kernel started without a template serves one submission

    async def run_test(
        self, grade_id: str, bridge, fetch: bool = True, hidden_marker: str | None = None
    ) -> list:
        """The outputs of one test cell, run on the student's current answers (fetched
        again only when the student's kernel may have changed them: ``fetch``). A cell whose
        source holds ``hidden_marker`` (nbgrader's start of hidden tests) runs as a hidden
        test: it shows nothing the student's kernel said (``trusted_side.said``)."""
        for position, code in self.plan.prelude_before(grade_id, self.done):
            await self.run_trusted(code, f"the instructor's cell {position + 1}")
            self.done.add(position)
            fetch = True  # an instructor's cell may have bound an answer name itself
        # The answers are read in the test cell's own request, first (``tests_kernel``).
        bind = (
            {"names": self.plan.answer_names, "functions": self.plan.function_names}
            if fetch or self.plan.tests_rebind
            else None
        )
        code = self.plan.tests[grade_id].code
        hidden = bool(hidden_marker) and hidden_marker in code
        status, outputs = await self.execute(code, bridge, bind=bind, hidden=hidden)
        return outputs

    async def run_trusted(self, code: str, what: str, bridge=None) -> None:
        """Run code of the grader's or the instructor's, which must not fail."""
        status, outputs = await self.execute(code, bridge, keep=False)
        if status != "ok":
            raise TrustedKernelProblem(f"{what} failed in the test kernel: {_error_text(outputs)}")

    async def too_costly(self) -> list[str]:
        """What this submission's answers had refused as too costly to check, as the test
        kernel's trusted side noted it (``trusted_side.TOO_COSTLY``); read through the
        execute reply's user expressions, which no student's text can fill."""
        expression = (
            f"__import__('json').dumps(__import__({trusted_side.__name__!r}, "
            "fromlist=['_']).TOO_COSTLY[:20])"
        )
        status, _ = await self.execute("", keep=False, expressions={"costly": expression})
        value = (self.last_reply or {}).get("user_expressions", {}).get("costly", {})
        try:
            noted = json.loads(ast.literal_eval(value["data"]["text/plain"]))
        except Exception:  # noqa: BLE001 - nothing noted, or no answer: nothing to say
            return []
        return [protocol.message_text(n) for n in noted if type(n) is str]

    async def execute(
        self,
        code: str,
        bridge=None,
        keep: bool = True,
        expressions=None,
        bind=None,
        hidden: bool = False,
    ):
        """Run one cell; forward its requests to the student's kernel through ``bridge``.
        ``bind``: the answers to read first, in the same request (``protocol.BIND_KEY``);
        ``hidden``: a hidden test's cell (``protocol.HIDDEN_KEY``).

        The cell's own time (not counting the student's functions, which the bridge
        times) is limited to ``cell_timeout``: past it the test kernel is at fault.
        """
        kc = self.kc
        # Trusted code's outputs are not kept: it runs silent (no input echo, no result).
        request = kc.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": not keep,
                "store_history": False,
                "user_expressions": expressions or {},
                "allow_stdin": bridge is not None,
                "stop_on_error": False,
            },
            metadata={
                **({protocol.BIND_KEY: bind} if bind is not None else {}),
                **({protocol.HIDDEN_KEY: True} if hidden else {}),
            },
        )
        msg_id = request["header"]["msg_id"]
        try:
            kc.shell_channel.send(request)
        except zmq.ZMQError as exc:  # it has ended (attack 19, a10): the grader's to say
            raise self._ended(exc) from None
        outputs: list = []
        reply = None
        idle = False
        started = time.monotonic()
        waited = 0.0  # seconds spent waiting for the student's kernel
        poller = zmq.asyncio.Poller()
        channels = {
            kc.iopub_channel.socket: kc.iopub_channel,
            kc.stdin_channel.socket: kc.stdin_channel,
            kc.shell_channel.socket: kc.shell_channel,
        }
        for socket in channels:
            poller.register(socket, zmq.POLLIN)
        while not (idle and reply is not None):
            own = time.monotonic() - started - waited
            if own > self.cell_timeout:
                await self._interrupt()
                raise TrustedKernelProblem(
                    f"a test cell ran {self.cell_timeout:g} s in the test kernel without finishing"
                )
            if not self.kernel.alive():
                events = self.kernel.km.events if self.kernel.km is not None else []
                raise TrustedKernelProblem("the test kernel died: " + _death(events))
            await asyncio.sleep(0)  # a poll that finds messages ready does not yield
            ready = dict(await poller.poll(timeout=200))
            for socket, channel in channels.items():
                if socket not in ready:
                    continue
                # What it holds now, one poll for up to DRAIN messages (never unbounded: the
                # limits above are checked between polls).
                for _ in range(DRAIN):
                    msg = await take(channel)
                    if msg is None:
                        break
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind = msg["msg_type"]
                    if channel is kc.shell_channel:
                        reply = msg["content"]
                    elif channel is kc.stdin_channel:
                        prompt = str(msg["content"].get("prompt", ""))
                        if bridge is None or not protocol.is_request(prompt):
                            kc.input("")
                            continue
                        asked = time.monotonic()
                        answer = await bridge.ask(prompt)
                        try:
                            kc.input(answer)
                        except zmq.ZMQError as exc:  # it ended while the student's kernel ran
                            raise self._ended(exc) from None
                        waited += time.monotonic() - asked
                    elif kind == "status":
                        idle = idle or msg["content"].get("execution_state") == "idle"
                    elif kind == "clear_output" and keep:
                        outputs.clear()
                    elif kind in OUTPUT_MSGS and keep:
                        self.budget.add(outputs, output_from_msg(msg), content_size(msg["content"]))
        self.last_reply = reply
        if reply.get(protocol.BIND_FAILED) is True:
            raise TrustedKernelProblem(
                "reading the answers failed in the test kernel: "
                f"{reply.get('ename')}: {reply.get('evalue')}"[:400]
            )
        status = reply.get("status", "error")
        if not keep and status == "error":
            # Not kept: the notebook never shows them. The error still says what failed.
            return status, [_reply_error(reply)]
        if status != "ok" and not any(o.get("output_type") == "error" for o in outputs):
            # nbgrader passes a test cell that shows no error: a cell that failed must show
            # one, even where its own error output never came (attack 33: the kernel could
            # not send it).
            outputs.append(_reply_error(reply))
        return status, outputs

    def _ended(self, exc: Exception) -> TrustedKernelProblem:
        """The test kernel took no message: it has died (and says how), or cannot be reached."""
        if not self.kernel.alive():
            events = self.kernel.km.events if self.kernel.km is not None else []
            return TrustedKernelProblem("the test kernel died: " + _death(events))
        return TrustedKernelProblem(f"the test kernel took no message ({exc})")

    async def _interrupt(self) -> None:
        self.kernel.close()  # a kernel that hung is never asked again: it and its template go


def _reply_error(reply: dict):
    return new_output(
        "error",
        ename=str(reply.get("ename", "Error"))[:200],
        evalue=str(reply.get("evalue", "the test cell failed"))[:2000],
        traceback=[],
    )


def _error_text(outputs) -> str:
    for out in outputs:
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue')}"[:300]
    return "no reply"


def _death(events: list) -> str:
    for event in reversed(events):
        reason = fates.kill_reason(event)
        if reason:
            return reason
    return "it exited"
