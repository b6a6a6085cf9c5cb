"""The two kernels' own messages (real ipykernels, no sandbox): the student's kernel answers
a bridge request without running a cell, and the test kernel reads the answers in a test
cell's own request. The runs across sandboxed kernels are in test_pipeline.py and the
course-grade tests."""

from __future__ import annotations

import queue

import pytest

from autograder.bridge import plaindata, protocol
from tests import app_kernels
from tests.app_kernels import APPS, KINDS

TIMEOUT = 30


@pytest.fixture
def kernel(request, tmp_path):
    """A kernel of a kind ("student", "test"), under the grading application, or of
    (kind, application): what the bridge does must not depend on which application."""
    kind, app = request.param if isinstance(request.param, tuple) else (request.param, "grading")
    km, kc = app_kernels.start(tmp_path, app, kind)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def run(kc, code: str) -> dict:
    reply = kc.execute_interactive(code, timeout=TIMEOUT, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]
    return reply["content"]


def iopub_until_idle(kc, msg_id: str) -> list[dict]:
    seen = []
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
        seen.append(msg)


def shell_reply(kc, msg_id: str) -> dict:
    while True:
        msg = kc.get_shell_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def shell_replies(kc, msg_id: str, wait: float = 0.5) -> list[dict]:
    """The shell messages for ``msg_id`` that come within ``wait`` seconds."""
    found = []
    while True:
        try:
            msg = kc.get_shell_msg(timeout=wait)
        except queue.Empty:
            return found
        if msg["parent_header"].get("msg_id") == msg_id:
            found.append(msg)


def ask(kc, prompt) -> tuple[list[dict], list[dict]]:
    """A bridge call: what the kernel sent on IOPub before its idle status, and on the
    shell channel."""
    request = kc.session.msg(protocol.REQUEST_MSG, {"prompt": prompt})
    kc.shell_channel.send(request)
    msg_id = request["header"]["msg_id"]
    return iopub_until_idle(kc, msg_id), shell_replies(kc, msg_id)


@pytest.mark.parametrize("kernel", ["student"], indirect=True)
def test_the_students_kernel_answers_a_request_without_running_a_cell(kernel):
    before = run(kernel, "def double(x):\n    print('doubling')\n    return 2 * x\nn = 5")
    seen, replies = ask(kernel, protocol.call_request("double", [plaindata.encode(21)], []))
    answers = [m for m in seen if m["msg_type"] == "display_data"]
    assert len(answers) == 1
    assert protocol.loads(answers[0]["content"]["data"][protocol.REPLY_MIME])["ok"] == 42
    # What the function printed came as the request's own output, for the grader to count.
    assert any(m["msg_type"] == "stream" and "doubling" in m["content"]["text"] for m in seen)
    # Nothing the grader does not read: no busy status before the call, no shell reply.
    assert {m["msg_type"] for m in seen} == {"display_data", "stream"} and replies == []
    # Nothing the notebook can see changed: no execution count, no input in its history.
    after = run(kernel, "n_inputs = len(In)")
    assert after["execution_count"] == before["execution_count"] + 1
    seen, _ = ask(kernel, protocol.describe_request(["n", "n_inputs"]))
    values = dict(protocol.loads(seen[-1]["content"]["data"][protocol.REPLY_MIME])["values"])
    assert values == {"n": 5, "n_inputs": after["execution_count"] + 1}


@pytest.mark.parametrize("kernel", ["student"], indirect=True)
def test_a_request_that_is_no_text_gets_no_answer(kernel):
    seen, replies = ask(kernel, 42)
    assert seen == [] and replies == []  # the grader: "your kernel sent no answer"


def run_test_cell(kc, code: str, bind) -> tuple[list[dict], dict, list[str]]:
    """Run a test cell whose request reads ``bind`` first; answer the describe it sends."""
    request = kc.session.msg(
        "execute_request",
        {"code": code, "silent": False, "store_history": False, "allow_stdin": True},
        metadata={protocol.BIND_KEY: bind},
    )
    kc.shell_channel.send(request)
    msg_id, asked = request["header"]["msg_id"], []
    while True:  # the describe comes on stdin before the cell runs
        try:
            prompt = kc.get_stdin_msg(timeout=2)["content"]["prompt"]
        except queue.Empty:
            break
        asked.append(prompt)
        kc.input(protocol.dumps({"values": [["answer", plaindata.encode(41)]]}))
    return iopub_until_idle(kc, msg_id), shell_reply(kc, msg_id)["content"], asked


@pytest.mark.parametrize("kernel", ["test"], indirect=True)
def test_the_test_kernel_reads_the_answers_in_the_test_cells_own_request(kernel):
    bind = {"names": ["answer"], "functions": []}
    seen, reply, asked = run_test_cell(kernel, "print(answer + 1)", bind)
    assert [protocol.request_body(p)["op"] for p in asked] == ["describe"]
    assert reply["status"] == "ok" and protocol.BIND_FAILED not in reply
    assert [m["content"]["text"] for m in seen if m["msg_type"] == "stream"] == ["42\n"]
    # The grader reads outputs, the idle status and the reply: no busy status, no echo.
    assert [m["msg_type"] for m in seen] == ["stream"]


@pytest.mark.parametrize("kernel", ["test"], indirect=True)
def test_a_test_cell_whose_answers_cannot_be_read_does_not_run(kernel):
    seen, reply, asked = run_test_cell(kernel, "print('the test ran')", {"names": 3})
    assert reply["status"] == "error" and reply[protocol.BIND_FAILED] is True
    assert not [m for m in seen if m["msg_type"] == "stream"]
    # Without the key, a cell runs as in any kernel, and an error of its own is no such reply.
    seen, reply, asked = run_test_cell(kernel, "raise ValueError('x')", None)
    assert reply["status"] == "error" and protocol.BIND_FAILED not in reply and not asked


class Relay:
    """The grader's end of the bridge, answering every request with ``text``."""

    def __init__(self, text: str):
        self.text, self.asked = text, []

    async def ask(self, prompt: str) -> str:
        self.asked.append(prompt)
        return self.text


def test_session(code: str, bridge=None, bind=None) -> tuple[str, list]:
    """``code`` run as the grader runs a test cell (``trusted_kernel.Session.execute``), in
    a real test kernel: its status, and the outputs the graded notebook would keep."""
    import asyncio
    import types

    from jupyter_client.manager import AsyncKernelManager

    from autograder.worker import outputs, trusted_kernel

    async def main():
        km = AsyncKernelManager(kernel_name="python3")
        await km.start_kernel(
            extra_arguments=["--HistoryManager.hist_file=:memory:", protocol.TESTS_KERNEL_OPTION]
        )
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)
            kernel = types.SimpleNamespace(alive=lambda: True, km=None)
            session = trusted_kernel.Session(
                kernel, kc, None, TIMEOUT, outputs.OutputBudget(10**6, [])
            )
            return await session.execute(code, bridge, bind=bind)
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    return asyncio.run(main())


test_session.__test__ = False  # a helper, not a test


def errors(outputs: list) -> list[str]:
    return [o["evalue"] for o in outputs if o["output_type"] == "error"]


def test_a_test_cell_that_failed_shows_an_error_even_where_the_kernel_could_not_send_it():
    """A lone surrogate cannot be sent (no UTF-8 carries it): the failed cell's own error
    output never comes, and nbgrader would pass a cell that shows no error (attack 33)."""
    status, outputs = test_session("raise ValueError('a lone surrogate: ' + chr(0xD800))")
    assert status == "error"
    assert errors(outputs), outputs


def test_the_end_of_input_as_a_reply_is_a_failed_answer_not_the_test_kernels_failure():
    """ipykernel's raw_input raises EOFError for the reply "\\x04" (attack 33): any text
    the student's kernel sends is its answer, and this one is none."""
    bridge = Relay("\x04")
    bind = {"names": ["answer"], "functions": []}
    status, outputs = test_session("answer", bridge, bind)
    assert [protocol.request_body(p)["op"] for p in bridge.asked] == ["describe"]
    assert status == "error" and "answer" in " ".join(errors(outputs))


def test_a_failing_test_cell_shows_a_plain_traceback_with_its_assert_and_message():
    """The test kernel's tracebacks are IPython's "Plain" (the failing lines and the
    message), not its default "Context" (every frame's source, highlighted): a fourth of
    the CPU for a failing test, and the student still reads which assert failed and why."""
    import re

    code = "def check(x):\n    assert x == 2, 'x should be 2'\ncheck(1)"
    status, outputs = test_session(code)
    (error,) = [o for o in outputs if o["output_type"] == "error"]
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error["traceback"]))
    assert status == "error" and error["evalue"] == "x should be 2"
    assert "assert x == 2, 'x should be 2'" in text
    assert text.lstrip().startswith("Traceback (most recent call last):"), text
    assert "---->" not in text and "-" * 20 not in text, text  # Context's arrows and rule


def printed(kc, code: str) -> str:
    texts = []
    kc.execute_interactive(
        code,
        timeout=TIMEOUT,
        output_hook=lambda m: (
            texts.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None
        ),
    )
    return "".join(texts)


@pytest.mark.parametrize(
    "kernel",
    [(kind, app) for kind in KINDS for app in APPS],
    indirect=True,
    ids=[f"{kind}-{app}" for kind in KINDS for app in APPS],
)
def test_both_kernels_transform_a_cell_once_and_never_reuse_it_for_a_later_cell(kernel):
    """ipykernel transforms each cell twice (to ask whether it awaits, then in run_cell):
    ``cells.TransformOnce`` makes the second a copy of the first, and only within one
    request: a transformer a cell adds applies to the next cell of the same text."""
    run(
        kernel,
        "calls = []\ninner = get_ipython().transform_cell.transform\n"
        "get_ipython().transform_cell.transform = lambda c: calls.append(c) or inner(c)",
    )
    run(kernel, "x = 1")
    assert printed(kernel, "print(len(calls))") == "2\n"  # this cell and the one before
    # A cell that awaits is transformed once (what was kept is not taken): it adds a
    # transformer, and the same text run again must go through it.
    awaits = (
        "import asyncio\nawait asyncio.sleep(0)\n"
        "get_ipython().input_transformers_post.append("
        "lambda lines: [l.replace(\"'a'\", \"'b'\") for l in lines])\nprint('a')"
    )
    assert printed(kernel, awaits) == "a\n"
    assert printed(kernel, awaits) == "b\n"


# What a flush of sys.stdout hands the IOPub thread: with nothing written, nothing (the
# grading application's OutStream); after a write, the send and the wait for it.
FLUSHES = """
import sys
handed = []
thread = sys.stdout.pub_thread
thread.schedule = lambda f, _schedule=thread.schedule: handed.append(f) or _schedule(f)
sys.stdout.flush()
empty = len(handed)
sys.stdout.write("x")
sys.stdout.flush()
written = len(handed)
del thread.schedule
print(empty, written > empty)
"""


@pytest.mark.parametrize(
    "kernel",
    [(kind, app) for kind in KINDS for app in APPS],
    indirect=True,
    ids=[f"{kind}-{app}" for kind in KINDS for app in APPS],
)
def test_the_grading_application_reads_the_shell_in_the_main_thread_and_flushes_nothing_for_nothing(
    kernel, request
):
    """``autograder.sandbox.kernel_app``: a grading kernel has no shell channel thread and
    offers no subshells; ipykernel's own application keeps both. Under either, a cell with
    a top-level await runs (ipykernel 7.4 reads the thread's ``parent_thread`` there), what
    a cell writes comes before its reply, and an empty flush waits on the IOPub thread only
    under ipykernel's own."""
    grading = request.node.callspec.id.endswith("grading")
    threads = printed(
        kernel, "import threading\nprint(sorted(t.name for t in threading.enumerate()))"
    )
    assert ("'Shell channel'" in threads) is not grading, threads
    assert "'IOPub'" in threads and "'Control'" in threads, threads
    kernel.kernel_info()
    info = kernel.get_shell_msg(timeout=TIMEOUT)["content"]
    assert ("kernel subshells" in info["supported_features"]) is not grading, info
    assert (
        printed(kernel, "import asyncio\nawait asyncio.sleep(0)\nprint('awaited')") == "awaited\n"
    )
    assert printed(kernel, FLUSHES) == ("x0 True\n" if grading else "x2 True\n")
