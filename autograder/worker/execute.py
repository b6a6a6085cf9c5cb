"""nbgrader's Execute, split across two sandboxed kernels.

The seam is ``Autograde.autograde_preprocessors``: nbgrader still sanitizes the
submission, restores the test cells from the gradebook, saves the per-cell scores from
the outputs and writes the autograded notebook. Only the running changes:

- the **student's kernel** runs every cell of the submission except the test cells:
  answer cells, the instructor's set-up cells as nbgrader restored them, and whatever
  cells the student added. It never receives a test cell, so no hidden test, expected
  value or test variable ever exists in it, in a file, a cell, a global or its history.
  Its working folder is a tmpfs holding copies of the submission's own files and the
  release's data files, never the autograded notebook.
- the **test kernel** (``autograder.worker.trusted_kernel``) runs every test cell, as the source
  notebook has it, on the student's answers fetched across the bridge as plain data
  (``autograder.bridge.trusted_side``, ``autograder.bridge.student_side``). Its outputs are the test
  cells' outputs, so nbgrader's own rule scores them.

What happens to a submission is recorded in ``events`` (timeouts, a kernel that died,
output dropped, a test kernel problem), which the worker turns into the fate. Output is
capped on every path: streams, displays, display updates, errors, widget messages, and
the error of an execute reply. The batch always goes on: a student's kernel that dies
gives the cells after it an error output, and a test kernel that cannot finish has
every test cell's points withheld (``withheld``), never given.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from pathlib import Path
from queue import Empty

import zmq
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import ClearHiddenTests, Execute
from traitlets import Any, Bool, Integer, Unicode

from autograder import fates
from autograder.bridge import protocol, testplan
from autograder.fates import Event, Kind
from autograder.sandbox.bubblewrap import Sandbox
from autograder.sandbox.clients import take
from autograder.sandbox.messages import WIRE_BYTES
from autograder.worker import trusted_kernel
from autograder.worker.outputs import OUTPUT_KINDS, OutputBudget, content_size, error_output
from autograder.worker.student_kernels import ForkedKernelManager

INTERRUPT_GRACE = 5  # seconds a student's kernel has to stop after an interrupt


class RunRecord(dict):
    """What one job's autograde recorded (events, seconds per step, whether the test
    kernel's template had served before), handed to nbgrader's preprocessor through the
    config. traitlets deep-copies config values; this one stays the job's own object."""

    def __deepcopy__(self, memo):
        return self


def grade_id(cell) -> str:
    return testplan.nbgrader_meta(cell).get("grade_id", "")


# Steps that happen once per worker (and again where a template is replaced), not per
# submission: the benchmark shows them per worker.
STUDENT_TEMPLATE_START = "student kernel: its template's start (once per worker)"
TEST_TEMPLATE_START = "test kernel: its template's start (once per worker, beside the student's)"


class Clock(dict):
    """Seconds spent in each step of one run, for the report and the benchmark: a step
    timed as it runs (``step``; a step inside another, the student's functions inside
    test cells, is not counted twice), or the time since the last lap (``lap``)."""

    def __init__(self) -> None:
        super().__init__()
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self[name] = round(now - self._last, 3)
        self._last = now

    @contextlib.contextmanager
    def step(self, name: str):
        started = time.monotonic()
        outer = getattr(self, "_inner", None)
        self._inner = 0.0
        try:
            yield
        finally:
            spent = time.monotonic() - started
            self[name] = round(self.get(name, 0.0) + spent - self._inner, 3)
            self._inner = (outer or 0.0) + spent if outer is not None else None


class TwoKernelExecute(Execute):
    """Answer cells in the student's kernel, test cells in the trusted test kernel."""

    source_notebook = Unicode("", help="The source notebook (solutions, hidden tests).").tag(
        config=True
    )
    student_files = Unicode("", help="Folder of regular files for the student's kernel.").tag(
        config=True
    )
    test_files = Unicode("", help="Folder of regular files for the test kernel.").tag(config=True)
    test_uid = Integer(-1, help="As root: the test kernel's uid.").tag(config=True)
    test_slot = Integer(0, help="The grading thread's slot: its own test-kernel template.").tag(
        config=True
    )
    record = Any(
        None,
        allow_none=True,
        help="A dict of the job's own, given by the worker: "
        "this run's events and seconds per step are put in it (nbgrader makes the "
        "preprocessor, so this is how they reach the job, whatever thread runs it).",
    ).tag(config=True)

    # nbgrader raises here, and the student's kernel was then stopped: every later test
    # scored 0. But a kernel's output channel (a zmq PUB socket) drops what passes its
    # queue, the "idle" that ends a cell included, whenever the grader reads more slowly
    # than the cell writes: on a loaded CI machine, a notebook that graded in full elsewhere
    # got 0 (0.13.1). What the grade needs of an answer cell came in its reply, so the cell
    # keeps the output read within ``iopub_timeout`` of the reply, says the rest did not
    # arrive, and grading goes on.
    raise_on_iopub_timeout = Bool(
        False, help="Stop the student's kernel when a cell's output ends without its idle."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", ForkedKernelManager)
        super().__init__(*args, **kwargs)
        self.events: list[Event] = []
        self.reused_test_kernel = False
        self._idle = False  # whether the running answer cell's output ended with its idle

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self._check_assign_resources(resources)
        self.reset_execution_trackers()
        self.events = []
        self.budget = OutputBudget(
            Sandbox(config=self.config).max_output_mb * 1_000_000, self.events
        )
        self._stopped_by = ""
        self.answers_changed = True  # the test kernel must fetch the answers again
        self.seconds = Clock()
        run_sync(self._async_grade)()
        return self.nb, self.resources

    async def _async_grade(self) -> None:
        plan = testplan.read(self.source_notebook)
        tests = {
            i
            for i, c in enumerate(self.nb.cells)
            if c.cell_type == "code" and grade_id(c) in plan.tests
        }
        kernel = trusted_kernel.template(
            self.config, Path(self.test_files), self.test_uid, self.test_slot
        )
        self.reused_test_kernel = kernel.reused
        session, student_events = None, []
        clock = self.seconds
        # The test kernel is forked while the student's kernel starts: neither waits on the other.
        forking = asyncio.ensure_future(kernel.session(plan, self.timeout or 60, self.budget))
        try:
            starting = clock.step("student kernel: start")
            starting.__enter__()
            async with self.async_setup_kernel(cwd="/"):
                student_events = self.km.events
                info = await self.async_wait_for_reply(self.kc.kernel_info())
                self.nb.metadata["language_info"] = info["content"]["language_info"]
                starting.__exit__(None, None, None)
                # A template's own start (once per worker, or after one was replaced) is
                # told apart from what every kernel's start costs.
                kept = getattr(self.km, "_kept", None)
                spent = kept.take_start_seconds() if kept is not None else 0.0
                if spent:
                    clock["student kernel: start"] = round(
                        clock["student kernel: start"] - spent, 3
                    )
                    clock[STUDENT_TEMPLATE_START] = round(spent, 3)
                if getattr(self.km, "without_template", None):
                    self.events.append(
                        Event(Kind.NO_TEMPLATE, where="student", reason=self.km.without_template)
                    )
                with clock.step("test kernel: fork (beyond the student's start)"):
                    session = await forking
                spent = kernel.take_start_seconds()
                if spent:  # beside the student's kernel start, not after it
                    clock[TEST_TEMPLATE_START] = round(spent, 3)
                if kernel.without_template:
                    self.events.append(Event(Kind.NO_TEMPLATE, reason=kernel.without_template))
                bridge = StudentBridge(self)
                for index, cell in enumerate(self.nb.cells):
                    if index in tests:
                        with clock.step("test cells"):
                            await self._run_test(session, bridge, cell)
                    else:
                        with clock.step("answer cells"):
                            await self._run_student_cell(cell, index)
                self.set_widgets_metadata()
                for what in await session.too_costly():
                    self.events.append(Event(Kind.TOO_COSTLY, reason=what))
        except trusted_kernel.TrustedKernelProblem as problem:
            kernel.close()
            self._withhold(tests, str(problem))
        finally:
            session = session or await _settled(forking)
            if session is not None:
                session.end()
        self.events.extend(student_events)  # the watchdog's: memory, wall time
        self.km = None
        if self.record is not None:
            self.record.update(
                events=self.events, seconds=dict(self.seconds), reused=self.reused_test_kernel
            )

    async def _run_student_cell(self, cell, index: int) -> None:
        runs = cell.cell_type == "code" and cell.source.strip()
        if self._stopped_by:
            if runs:
                cell.outputs = [error_output("KernelDied", f"not run: {self._stopped_by}")]
            return
        where = f"cell {grade_id(cell) or index}"
        self._idle = False
        try:
            await self.async_execute_cell(cell, index, store_history=True)
            self.answers_changed = True
            if runs and not self._idle:
                self._output_lost(cell, index)
            if any(o.get("ename") == "MemoryError" for o in cell.get("outputs", [])):
                self.events.append(Event(Kind.MEMORY_ERROR))
        except DeadKernelError:
            self.student_kernel_stopped(where)
            cell.outputs.append(error_output("KernelDied", self._stopped_by))
        except CellTimeoutError:
            # No output came in time: the kernel sent a message over the size limit (which
            # cuts its output channel for good) or hangs its own output. Either way it
            # cannot be read any more.
            limit = Sandbox(config=self.config).max_message_mb
            self.student_kernel_stopped(
                where, f"its output could not be read (a message over {limit} MB, or none in time)"
            )
            await self.km.shutdown_kernel(now=True)
            cell.outputs = [error_output("KernelStopped", self._stopped_by)]
        except Exception as exc:  # noqa: BLE001 - a message nbclient cannot read, and so on
            self.student_kernel_stopped(
                where, f"it sent a message the grader cannot read ({type(exc).__name__})"
            )
            await self.km.shutdown_kernel(now=True)
            cell.outputs = [error_output("KernelStopped", self._stopped_by)]

    def _output_lost(self, cell, index: int) -> None:
        where = grade_id(cell) or f"cell {index}"
        self.events.append(Event(Kind.OUTPUT_TRUNCATED, reason="lost", where=where))
        cell.outputs.append(
            NotebookNode(
                output_type="stream", name="stdout", text=LOST_NOTE.format(self.iopub_timeout)
            )
        )

    async def _run_test(self, session, bridge, cell) -> None:
        if self._stopped_by:
            cell.outputs = [error_output("NotGraded", f"not graded: {self._stopped_by}")]
            return
        bridge.start_cell(self.timeout or 60)
        fetch, self.answers_changed = self.answers_changed, False
        cell.outputs = await session.run_test(
            grade_id(cell), bridge, fetch, hidden_marker=self._hidden_marker()
        )
        cell.execution_count = None

    def _hidden_marker(self) -> str:
        """Where a cell's hidden tests begin: nbgrader's own setting, which the feedback's
        ``HideHiddenTests`` reads too."""
        if not hasattr(self, "_marker"):
            self._marker = ClearHiddenTests(config=self.config).begin_test_delimeter
        return self._marker

    def student_kernel_stopped(self, where: str, reason: str = "") -> None:
        status = None
        if not reason:
            reason, status = self._death_reason()
        self._stopped_by = reason
        self.events.append(Event(Kind.DIED, reason=reason, where=where, exit_status=status))

    def _death_reason(self) -> tuple[str, int | None]:
        """Why the student's kernel died, in words, and its exit status where it exited."""
        oom = getattr(self.km, "oom_killed", lambda: False)()
        if oom and not any(e.kind is Kind.MEMORY for e in getattr(self.km, "events", [])):
            limit = Sandbox(config=self.config).memory_mb
            self.km.events.append(Event(Kind.MEMORY, used=limit, limit=limit))
        for event in reversed(getattr(self.km, "events", [])):
            reason = fates.kill_reason(event)
            if reason:
                return reason, None
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        if not getattr(process, "said", True):
            # Never a limit's status: the silence may be the kernel's own doing.
            return (
                "the kernel ended, and the template it was forked from did not say how (a "
                "kernel can stop or kill its template)",
                None,
            )
        used = getattr(process, "cpu_seconds", None)
        limit = Sandbox(config=self.config).cpu_seconds
        if code in fates.CPU_LIMIT_STATUSES and used is not None and limit and used < limit - 1:
            # The status of a kill at the CPU-time limit, but far from it: the kernel's own
            # choice (os._exit(152), or its own SIGXCPU), never the grader's limit.
            return f"the kernel exited (status {code}, after {used:g} of {limit} CPU s)", None
        return f"the kernel exited (status {code})", code

    def _withhold(self, tests: set[int], why: str) -> None:
        self.events.append(Event(Kind.NEEDS_REVIEW, reason=why, reused=self.reused_test_kernel))
        for index in tests:
            self.nb.cells[index].outputs = [
                error_output("Withheld", f"points withheld until the grader can check this: {why}")
            ]

    # -- output caps on every path of the student's kernel -------------------------------
    def process_message(self, msg, cell, cell_index):
        kind = msg["msg_type"]
        content = msg["content"] = plain_counts(msg["content"])
        if kind in PROMPT_ONLY:
            # Never counted (a dropped "idle" would hold the cell until its timeout), so
            # cut to what nbclient reads of them: attack 30 sent a status whose
            # execution_count was 50 MB, which nbclient kept in the cell, once per cell.
            msg["content"] = {k: content[k] for k in PROMPT_ONLY[kind] if k in content}
            state = msg["content"].get("execution_state")
            if kind == "status" and state not in STATES:
                return None
            self._idle = self._idle or (kind == "status" and state == "idle")
        elif not self.budget.allows(message_size(msg), output=kind in OUTPUT_KINDS):
            if kind in OUTPUT_KINDS:
                self.budget.note(cell.outputs)
            return None
        elif kind in DISPLAY_KINDS and not self._display_fits(msg, cell):
            return None
        return super().process_message(msg, cell, cell_index)

    def _display_fits(self, msg: dict, cell) -> bool:
        """Whether the notebook may hold what a display message writes. nbclient copies
        its data into every output shown under its display id, whatever that output's
        kind (a stream or an error with a display id is shown under it too), so each copy
        costs the message's bytes: one update of 0.85 MB copied into 1,900 error outputs
        made a notebook of 1.6 GB and a grading process of 10 GB (outside attack 39),
        while the budget had counted the update once."""
        rewrites = self._rewrites(msg["content"])
        if not rewrites:
            return True
        if not self.budget.allows_rewrites(cell.outputs, rewrites):
            return False
        # The message itself was counted once: an update adds no output of its own.
        copies = rewrites - (msg["msg_type"] == "update_display_data")
        if copies and not self.budget.allows(message_size(msg) * copies):
            self.budget.note(cell.outputs)
            return False
        return True

    def _rewrites(self, content: dict) -> int:
        """How many outputs nbclient rewrites for this message's display id."""
        transient = content.get("transient")
        shown = self._display_id_map.get(transient.get("display_id")) if transient else None
        return sum(len(indices) for indices in shown.values()) if shown else 0

    def on_cell_executed(self, **kwargs):
        reply = kwargs["execute_reply"]["content"]
        if reply.get("status") == "error":
            # nbgrader appends the reply's own error when no output showed it: bounded too.
            reply["traceback"] = [str(line)[:2000] for line in reply.get("traceback", [])[:50]]
            reply["evalue"] = str(reply.get("evalue", ""))[:2000]
            if not self.budget.allows(content_size(reply)):
                reply["traceback"], reply["evalue"] = [], "(dropped: output limit)"
        return super().on_cell_executed(**kwargs)

    async def _async_handle_timeout(self, timeout, cell=None):
        self.events.append(Event(Kind.TIMEOUT, where=grade_id(cell) if cell else "", limit=timeout))
        # The cell's own processes go first: busy ones would starve the kernel of the CPU
        # share it needs to answer the interrupt, and whether it did would be luck.
        getattr(self.km, "kill_strays", lambda: 0)()
        return await super()._async_handle_timeout(timeout, cell)


LOST_NOTE = (
    "\n[course-grade: the rest of this cell's output did not arrive within {:g} s of its "
    "reply (a kernel's output channel drops messages when the grader reads more slowly "
    "than the cell writes)]\n"
)
# What nbclient reads of the messages that are never counted against the output budget.
PROMPT_ONLY = {"status": ("execution_state",), "execute_input": ("execution_count",)}
DISPLAY_KINDS = frozenset({"display_data", "update_display_data", "execute_result"})
STATES = frozenset({"busy", "idle", "starting"})
MAX_COUNT = 1 << 31


def message_size(msg) -> int:
    """What a message adds to the notebook's output: its content, and its binary buffers,
    which nbclient keeps (base64) for a widget until the notebook ends: 40 buffers of 55 MB,
    each message under the size cap, held 3 GB in the worker (attack 31)."""
    buffers = msg.get("buffers") or ()
    return content_size(msg["content"]) + sum(memoryview(b).nbytes for b in buffers)


def plain_counts(content):
    """A message's content with an ``execution_count`` nbformat accepts (an int >= 0, or
    null), else null: nbclient copies it into the cell from any message, and a string
    there made nbformat refuse the autograded notebook, the student's fate ``error``
    (the grader's own failure) on every run (attack 30)."""
    if not isinstance(content, dict) or "execution_count" not in content:
        return content
    count = content["execution_count"]
    if count is None or (type(count) is int and 0 <= count < MAX_COUNT):
        return content
    return {**content, "execution_count": None}


async def _settled(forking: asyncio.Future):
    """The test kernel's session once its fork has finished (never cut short: a fork
    stopped half-way would leave the kernel's client open), or None if it failed."""
    try:
        return await forking
    except Exception:  # noqa: BLE001 - a TrustedKernelProblem: withheld already, or moot
        return None


class RepliesSpent(Exception):
    """The student's kernel sent more than a submission's replies may weigh."""


class StudentBridge:
    """The grader's end of the bridge: forwards the test kernel's requests to the
    student's kernel and its replies back, bounded in size and time."""

    def __init__(self, executor: TwoKernelExecute):
        self.executor = executor
        sandbox = Sandbox(config=executor.config)
        self.max_chars = sandbox.max_message_mb * 1_000_000
        # Every reply is parsed by the grader and again by the test kernel: a reply padded
        # to the frame limit costs both about 0.5 CPU s however little it answers, so a
        # submission's replies share one bound (attack 20: 60 MB in each of 55 replies).
        self.max_replies = sandbox.max_replies_mb
        self.replies_left = self.max_replies * 1_000_000
        self.left = 0.0

    def start_cell(self, seconds: float) -> None:
        self.left = seconds  # the student's functions share one cell's time

    async def ask(self, prompt: str) -> str:
        ex = self.executor
        if ex._stopped_by:
            return protocol.failed(f"your kernel stopped ({ex._stopped_by})")
        if self.left <= 0:
            return protocol.failed("your functions already used this test's time")
        if self.replies_left < 0:
            return protocol.failed(self._replies_spent())
        kc = ex.kc
        # A message of its own, never an execute: no cell to parse, no execution count, no
        # run-cell hooks (``student_kernel.BridgeKernel``); the reply (a display) and the
        # idle status come as for a cell. About 55 asks a submission.
        request = kc.session.msg(protocol.REQUEST_MSG, {"prompt": prompt})
        msg_id = request["header"]["msg_id"]
        try:
            kc.shell_channel.send(request)
        except zmq.ZMQError:  # a kernel that ended takes no request: its own end, said
            if not await ex.km.is_alive():
                ex.student_kernel_stopped("a test's call")
                return protocol.failed(f"your kernel stopped ({ex._stopped_by})")
            return protocol.failed("your kernel took no request from the test")
        started = time.monotonic()
        if not protocol.is_describe(prompt):
            ex.answers_changed = True  # a function may have changed the notebook's globals
        try:
            with ex.seconds.step("the student's functions, for tests"):
                text = await asyncio.wait_for(self._reply(kc, msg_id), timeout=self.left)
        except asyncio.TimeoutError:
            ex.events.append(
                Event(Kind.TIMEOUT, where="(a test's call)", limit=round(self.left, 1))
            )
            await self._stop_student()
            return protocol.failed("your function did not finish in the test's time")
        except DeadKernelError:
            ex.student_kernel_stopped("a test's call")
            return protocol.failed(f"your kernel stopped ({ex._stopped_by})")
        except RepliesSpent:
            ex.events.append(Event(Kind.TOO_COSTLY, reason=self._replies_spent()))
            await self._stop_student()  # it may still be sending
            return protocol.failed(self._replies_spent())
        except Exception as exc:  # noqa: BLE001 - the kernel's message, never the grader's error
            # Whatever a call's messages hold is the student's kernel's to choose (attack 37:
            # a display whose data was a string raised here, and the fate was ``error``).
            await self._stop_student()
            return protocol.failed(
                f"your kernel sent a message the grader cannot read ({type(exc).__name__})"
            )
        finally:
            self.left -= time.monotonic() - started
        return text

    def _replies_spent(self) -> str:
        return (
            f"your kernel's answers to the tests passed {self.max_replies} MB in all; "
            "later calls got no answer"
        )

    async def _reply(self, kc, msg_id: str) -> str:
        text, idle = None, False
        iopub = kc.iopub_channel
        while not idle:
            # Reading what is already there never waits, so never yields: without this, a
            # function that prints without end would keep the call's time limit
            # (asyncio.wait_for) from ever ending it.
            await asyncio.sleep(0)
            try:
                # What IOPub holds already (the reply's messages come together); else wait.
                msg = await take(iopub)
                if msg is None and await iopub.socket.poll(1000):
                    msg = await take(iopub)
                if msg is None:
                    raise Empty
            except Exception:  # noqa: BLE001 - Empty, or unreadable: is the kernel still there?
                if not await self.executor.km.is_alive():
                    raise DeadKernelError("student kernel died") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status":
                idle = msg["content"].get("execution_state") == "idle"
                continue
            # Every message of a call counts, the reply and any display beside it: the
            # grader has parsed each one, whether or not it is passed on. In bytes on the
            # wire, where the session measured them (a character can be 4 bytes).
            weight = msg.get(WIRE_BYTES)
            if type(weight) is not int:
                weight = content_size(msg["content"], self.replies_left + 1)
            self.replies_left -= weight
            if self.replies_left < 0:
                raise RepliesSpent
            if kind == "display_data" and text is None:
                data = msg["content"].get("data")
                data = data.get(protocol.REPLY_MIME) if type(data) is dict else None
                if isinstance(data, str) and len(data) <= self.max_chars:
                    text = data
        return (
            text
            if text is not None
            else protocol.failed(
                "your kernel sent no answer (did the notebook change how it runs code?)"
            )
        )

    async def _stop_student(self) -> None:
        ex = self.executor
        try:
            await ex.km.interrupt_kernel()
            # Stopped when the kernel answers a request sent after the interrupt: its main
            # thread, which reads the shell socket (``kernel_app``), takes it only once the
            # call is over. Its id is new and random, so no reply sent ahead of time stands
            # for it: a function that ignored the interrupt had sent its own call's reply
            # first (ids are predictable), and went on (attack 35). A kernel that changes how
            # it handles a call (its own handler, which hands the work to a thread of its own
            # and returns) can still answer anything; it then costs only its own time, which
            # its wall-time limit bounds (attack 70 did so: its threads ran on, the call was
            # timed out, and the next submission was graded as before).
            proof = ex.kc.session.msg("kernel_info_request", {})
            proof["header"]["msg_id"] = proof["msg_id"] = secrets.token_hex(16)
            ex.kc.shell_channel.send(proof)
            deadline = time.monotonic() + INTERRUPT_GRACE
            while True:
                left = deadline - time.monotonic()
                reply = await asyncio.wait_for(ex.kc.get_shell_msg(), timeout=max(left, 0.001))
                if reply.get("parent_header", {}).get("msg_id") == proof["msg_id"]:
                    break
        except Exception:  # noqa: BLE001 - it did not stop: it is stopped for good
            await ex.km.shutdown_kernel(now=True)
            ex.student_kernel_stopped(
                "a test's call", "a function of yours did not stop when its time was up"
            )
