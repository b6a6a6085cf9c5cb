"""The bridge between the test kernel and the student's kernel, in one process.

``relay`` stands in for the grader: the test side's requests go straight to the student
side's ``serve`` (as text, exactly what crosses the real processes), and its replies come
back as text. The end-to-end runs across real sandboxed kernels are in test_pipeline.py.
"""

from __future__ import annotations

import json
import types

import pytest
import torch

from autograder.bridge import protocol, student_side, trusted_side
from tests.course.test_release import checks_of
from tests.units import UNITS, submissions


@pytest.fixture
def student(monkeypatch):
    """The student's namespace, reachable from the test side through the bridge."""
    namespace: dict = {}
    shell = types.SimpleNamespace(user_ns=namespace)
    sent: list[str] = []

    def publish(data):
        sent.append(data[protocol.REPLY_MIME])

    monkeypatch.setattr("IPython.display.publish_display_data", publish)

    def relay(prompt: str) -> dict:
        assert protocol.is_request(prompt)
        student_side.serve(shell, prompt)
        return protocol.loads(sent.pop())

    monkeypatch.setattr(trusted_side, "ask", relay)
    return namespace


def bound(names, namespace=None) -> dict:
    tests = dict(namespace or {})
    trusted_side.bind(tests, names)
    return tests


def test_answers_arrive_as_base_values_and_functions_as_proxies(student):
    class Liar(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

    student.update(
        q2_mb=Liar(0.5),
        winner="GPU",
        ticks=(96, 83),
        dtype=torch.float64,
        size_mb=lambda shape, dtype: 1.0,
        weird=object(),
    )
    tests = bound(
        ["q2_mb", "winner", "ticks", "dtype", "size_mb", "weird", "absent"],
        {"absent": "a stale value from an earlier submission"},
    )
    assert type(tests["q2_mb"]) is float and tests["q2_mb"] != 0.25
    assert tests["winner"] == "GPU" and tests["ticks"] == (96, 83)
    assert tests["dtype"] is torch.float64
    assert isinstance(tests["size_mb"], trusted_side.StudentFunction)
    assert tests["weird"] != tests["weird"] and "not a plain value" in repr(tests["weird"])
    assert "absent" not in tests


def test_a_call_runs_in_the_students_namespace_and_returns_plain_data(student):
    exec(
        "import math\ndef size_mb(shape, dtype):\n"
        "    return math.prod(shape) * dtype.itemsize / 1e6",
        student,
    )
    size_mb = bound(["size_mb"])["size_mb"]
    assert size_mb((16, 4096, 3), torch.float32) == pytest.approx(0.786432)
    assert size_mb(shape=(10,), dtype=torch.int8) == pytest.approx(1e-5)


def test_arguments_cross_by_value_and_models_take_their_changes(student):
    """A tensor the function fills comes back as its result, but the test's own tensor
    stays as the test made it; a model is the test's own object, changed in place."""
    exec(
        "def fill(t):\n    t.fill_(7)\n    return t\n"
        "def same(model):\n    return model.to('cpu')\n"
        "def fresh(t):\n    return t.clone()",
        student,
    )
    tests = bound(["fill", "same", "fresh"])
    x = torch.zeros(3)
    filled = tests["fill"](x)
    assert filled is not x and filled.tolist() == [7.0, 7.0, 7.0] and x.tolist() == [0.0] * 3
    model = torch.nn.Linear(2, 2)
    assert tests["same"](model) is model
    y = torch.ones(2)
    assert tests["fresh"](y) is not y
    exec("def same_shape(shape):\n    return shape", student)
    shape = (16, 4096, 3)
    assert bound(["same_shape"])["same_shape"](shape) == shape


def test_a_function_cannot_write_the_tests_expected_values(student):
    """A constant answer that rewrites the dict the test passed (to make the test's
    expected value its own) changes only its own copy."""
    exec(
        "def steady_state(stages, workers, overlap):\n"
        "    stages.clear()\n    stages.update(load=1.0, copy=1.0, compute=1.0)\n"
        "    return 3.0, 'load'",
        student,
    )
    stages = {"load": 5.0, "copy": 2.0, "compute": 8.0}
    assert bound(["steady_state"])["steady_state"](stages, 1, False) == (3.0, "load")
    assert stages == {"load": 5.0, "copy": 2.0, "compute": 8.0}


def test_a_model_that_comes_back_with_new_members_fails_and_stays_as_it_was(student):
    """The hidden-test leak of issue 17: a reply that gives the test's model an extra
    buffer (without its bytes) is refused; nothing of the test kernel's memory can come
    back on the next call."""
    exec(
        "import torch\n"
        "def train_step(model):\n"
        "    model.register_buffer('leak', torch.empty(4096, dtype=torch.uint8, device='meta'))\n"
        "    return 0.0",
        student,
    )
    model = torch.nn.Linear(2, 2)
    with pytest.raises(trusted_side.StudentAnswerError, match="buffers changed"):
        bound(["train_step"])["train_step"](model)
    assert not list(model.buffers())


def test_an_exception_named_like_one_that_stops_a_kernel_is_an_ordinary_one(student):
    exec(
        "class KeyboardInterrupt(Exception):\n    pass\n"
        "def stop(x):\n    raise KeyboardInterrupt('stop the tests')",
        student,
    )
    with pytest.raises(Exception) as info:
        bound(["stop"])["stop"](1)
    assert type(info.value).__name__ == "KeyboardInterrupt"
    assert isinstance(info.value, Exception) and type(info.value).__module__ == "your_notebook"


def test_the_students_exceptions_keep_their_type_and_message(student):
    exec(
        "class Mine(Exception):\n    pass\n"
        "def bad(x):\n    raise ValueError('no: ' + 'x' * 5000)\n"
        "def own(x):\n    raise Mine('mine')\n"
        "def leaves(x):\n    raise SystemExit(0)",
        student,
    )
    tests = bound(["bad", "own", "leaves"])
    with pytest.raises(ValueError, match="^no: x+$") as info:
        tests["bad"](1)
    assert len(str(info.value)) <= protocol.MAX_MESSAGE_CHARS
    with pytest.raises(Exception) as own:
        tests["own"](1)
    assert type(own.value).__name__ == "Mine" and str(own.value) == "mine"
    with pytest.raises(Exception) as leaves:  # never SystemExit in the test kernel
        tests["leaves"](1)
    assert type(leaves.value).__name__ == "SystemExit" and not isinstance(leaves.value, SystemExit)


def test_in_a_hidden_test_nothing_the_students_kernel_says_is_shown(student):
    """A function receives a hidden test's inputs; in a hidden test its words (a message, a
    class of its own named for them, why its answer cannot be read) never reach the test's
    message, so never the feedback (attack 43, L1). Outside one, they do."""
    exec(
        "def echo(x):\n    raise ValueError(f'given {x!r}')\n"
        "def named(x):\n    raise type(f'Given_{x}', (Exception,), {})('')\n"
        "def unreadable(x):\n    return (i for i in [x])",
        student,
    )
    tests = bound(["echo", "named", "unreadable"])
    with trusted_side.hidden_test(True):
        with pytest.raises(ValueError) as echoed:
            tests["echo"](4321)
        with pytest.raises(Exception) as named:
            tests["named"](4321)
        with pytest.raises(trusted_side.StudentAnswerError) as unreadable:
            tests["unreadable"](4321)
        hidden_bind = bound(["echo"], {})
    for error in (echoed.value, named.value, unreadable.value):
        assert "4321" not in f"{type(error).__name__}: {error}"
    assert str(echoed.value) == trusted_side.WITHHELD
    assert type(named.value).__name__ == "StudentException"
    assert isinstance(hidden_bind["echo"], trusted_side.StudentFunction)
    with pytest.raises(ValueError, match="given 4321"):  # a visible test shows them
        tests["echo"](4321)
    with pytest.raises(Exception, match="") as named_visible:
        tests["named"](4321)
    assert type(named_visible.value).__name__ == "Given_4321"


def test_a_result_without_a_plain_form_fails_the_test_with_a_message(student):
    exec("def gen(x):\n    return (i for i in range(3))", student)
    with pytest.raises(trusted_side.StudentAnswerError, match="cannot be checked"):
        bound(["gen"])["gen"](1)


@pytest.mark.parametrize(
    "reply",
    [
        "not json",
        "[" * 100_000 + "]" * 100_000,
        json.dumps({"ok": {"$": "arg", "i": 9}}),
        json.dumps({"ok": {"$": "tensor", "dtype": "os.system", "shape": [1], "device": "cpu"}}),
        json.dumps({"values": "everything"}),
        json.dumps({"ok": 1, "args": [{"$": "pickle"}]}),
    ],
)
def test_a_forged_reply_is_only_a_failed_answer(monkeypatch, reply):
    """Whatever the student's kernel sends, the test side raises an ordinary failure (or
    finds no answer); it never crashes, and never takes a forged value for a right one."""
    monkeypatch.setattr(trusted_side, "ask", lambda prompt: trusted_side.read_reply(reply))
    tests = {}
    trusted_side.bind(tests, ["f", "value"])
    assert "value" not in tests or isinstance(tests["value"], trusted_side.Unreadable)
    f = trusted_side.StudentFunction("f")
    x = torch.zeros(1)
    try:
        got = f(x)
    except Exception as error:  # noqa: BLE001 - an ordinary failure of the student's answer
        assert isinstance(error, (trusted_side.StudentAnswerError, RuntimeError))
    else:  # only an argument's state was forged: the arguments crossed by value
        assert got == 1
    assert x.tolist() == [0.0]


def test_a_training_step_with_a_models_optimizer_trains_the_tests_own_model(student):
    """A model and its optimizer cross together; the step made in the student's kernel
    reaches the test's model (same Parameter objects) and the optimizer's state."""
    exec(
        "import torch\n"
        "def train_step(model, optimizer, x, y):\n"
        "    optimizer.zero_grad()\n"
        "    loss = torch.nn.functional.mse_loss(model(x), y)\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    return loss.detach()",
        student,
    )
    train_step = bound(["train_step"])["train_step"]
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    twin = torch.nn.Linear(2, 1)
    twin.load_state_dict(model.state_dict())
    weight = model.weight
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(8, 2), torch.randn(8, 1)
    for _ in range(3):
        loss = train_step(model, opt, x, y)
        twin_opt.zero_grad()
        expected = torch.nn.functional.mse_loss(twin(x), y)
        expected.backward()
        twin_opt.step()
        assert torch.allclose(loss, expected.detach())
    assert model.weight is weight and torch.allclose(model.weight, twin.weight)
    momentum = opt.state_dict()["state"][0]["momentum_buffer"]
    assert torch.allclose(momentum, twin_opt.state_dict()["state"][0]["momentum_buffer"])


def test_the_test_plan_is_read_once_per_source_and_again_when_the_source_changes(tmp_path):
    import nbformat

    from autograder.bridge import testplan

    def source(*tests):
        cells = [
            nbformat.v4.new_code_cell(
                "answer = 1",
                metadata={
                    "nbgrader": {"solution": True, "grade": False, "grade_id": "a", "locked": False}
                },
            )
        ]
        cells += [
            nbformat.v4.new_code_cell(
                f"assert answer == {i}",
                metadata={
                    "nbgrader": {
                        "solution": False,
                        "grade": True,
                        "grade_id": t,
                        "points": 1,
                        "locked": True,
                    }
                },
            )
            for i, t in enumerate(tests)
        ]
        return nbformat.v4.new_notebook(cells=cells)

    path = tmp_path / "source.ipynb"
    nbformat.write(source("t1"), path)
    first = testplan.read(path)
    assert testplan.read(path) is first and list(first.tests) == ["t1"]
    nbformat.write(source("t1", "t2"), path)
    assert list(testplan.read(path).tests) == ["t1", "t2"]
    assert first.answer_names == ["answer"]


def test_only_the_names_a_question_asks_for_are_answers():
    """A helper that a solution binds on the way (its name is the solution's) is neither
    fetched nor named to the student's kernel; the names the release asks for are."""
    import nbformat

    from autograder.bridge import testplan

    cell = nbformat.v4.new_code_cell(
        "# Set float32_mb and float32_ms.\n### BEGIN SOLUTION\ncount = 256 * 3\n"
        "float32_mb = count * 4 / 10**6\nlink_mb_per_ms = 25\n"
        "float32_ms = float32_mb / link_mb_per_ms\n### END SOLUTION",
        metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "q"}},
    )
    function = nbformat.v4.new_code_cell(
        "def speed(x):\n    ### BEGIN SOLUTION\n    helper = 2\n    return x * helper\n"
        "    ### END SOLUTION\nscale = 3\n",
        metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": "f"}},
    )
    plan = testplan.plan(nbformat.v4.new_notebook(cells=[cell, function]))
    assert plan.answer_names == ["float32_mb", "float32_ms", "scale", "speed"]


def test_a_test_can_see_what_a_function_did_to_its_argument(student):
    """Arguments cross by value, so a test that checks a function left its argument alone
    asks what it became in the student's kernel: a new object, never the test's own."""
    exec(
        "import torch\ndef converts(batch):\n    batch.data = batch.data.float()\n    return batch\n"
        "def leaves(batch):\n    return batch.float()",
        student,
    )
    tests = bound(["converts", "leaves"])
    batch = torch.arange(3, dtype=torch.float64)
    tests["converts"](batch)
    became = tests["converts"].became(batch)
    assert became.dtype == torch.float32 and became is not batch and batch.dtype == torch.float64
    tests["leaves"](batch)
    assert tests["leaves"].became(batch).dtype == torch.float64


def test_an_argument_changed_into_what_cannot_be_sent_is_never_taken_as_unchanged(student):
    """A function that changes its argument into a dtype the bridge cannot send: the test
    is told so (an outside attack passed "the batch you were given is unchanged" with a
    batch destroyed as float8, since no state came back for any argument), and the other
    arguments' states still come back."""
    exec(
        "import torch\ndef destroys(batch, other):\n"
        "    batch.data = torch.zeros(batch.shape, dtype=torch.float8_e4m3fn)\n"
        "    other.data = other.data * 2\n"
        "    return 1",
        student,
    )
    tests = bound(["destroys"])
    batch, other = torch.ones(3), torch.ones(2)
    assert tests["destroys"](batch, other) == 1
    with pytest.raises(trusted_side.StudentAnswerError, match="cannot be checked"):
        tests["destroys"].became(batch)
    assert tests["destroys"].became(other).tolist() == [2.0, 2.0]
    assert batch.tolist() == [1.0, 1.0, 1.0]  # the test's own object, as the test made it


@pytest.mark.parametrize("args", [[], None, "x"])
def test_an_argument_whose_state_did_not_come_back_is_never_taken_as_unchanged(monkeypatch, args):
    """A reply that leaves out what a mutable argument became: the test withholds, never
    compares its own untouched object."""
    monkeypatch.setattr(trusted_side, "ask", lambda prompt: {"ok": 1, "args": args, "kwargs": []})
    f = trusted_side.StudentFunction("f")
    batch = torch.ones(2)
    assert f(batch) == 1
    with pytest.raises(trusted_side.StudentAnswerError, match="did not send back"):
        f.became(batch)


def test_an_answer_that_cannot_be_sent_hides_no_other(student):
    """An int of thousands of digits (past what str() will write) is that answer's problem:
    the other answers still arrive (one such answer made every answer "not defined yet")."""
    exec("big = 10 ** 5000\nsmall = 3\ndef f(x):\n    return x + 1", student)
    tests = bound(["big", "small", "f"])
    assert tests["small"] == 3 and tests["f"](1) == 2
    assert isinstance(tests["big"], trusted_side.Unreadable)


@pytest.mark.parametrize("unit", UNITS)
def test_a_reply_that_cannot_be_read_is_said_so_not_not_defined_yet(unit, monkeypatch):
    """When the student's kernel's whole reply cannot be read (a forged reply of 490,000
    nodes, a kernel gone), each answer says so; "not defined yet" told the tenth outside
    attacker to fill in cells that were filled. A reply read later clears it."""
    checks = checks_of(submissions(unit))
    notebook = checks.maps[0]
    monkeypatch.setattr(trusted_side, "ask", lambda prompt: {"unreadable": "a reply too deep"})
    trusted_side.bind(notebook, ["some_answer"])
    with pytest.raises(
        AssertionError, match="could not be read from your notebook's kernel: a reply too deep"
    ):
        checks["answer"]("some_answer")
    monkeypatch.setattr(trusted_side, "ask", lambda prompt: {"values": []})
    trusted_side.bind(notebook, ["some_answer"])
    with pytest.raises(AssertionError, match="is not defined yet"):
        checks["answer"]("some_answer")


def test_a_callable_module_the_tests_call_crosses_as_a_function(student):
    """An answer the solution defines with ``def``, written as an ``nn.Module`` whose
    ``forward`` does the work, is called in the student's kernel (a twelfth outside
    attack: it crossed as a model without its forward, and lost the question); the same
    Module under a name the tests only read is still a model."""

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    student.update(double=Double(), model=Double())
    tests: dict = {}
    trusted_side.bind(tests, ["double", "model"], ["double"])
    assert isinstance(tests["double"], trusted_side.StudentFunction)
    assert torch.equal(tests["double"](torch.ones(2)), torch.full((2,), 2.0))
    assert isinstance(tests["model"], torch.nn.Module)
