"""Runs in the trusted test kernel: the student's answers, as the test cells see them.

The test kernel runs the instructor's cells of the source notebook (set-up, checks and
every test cell, hidden tests included) and never a line of the student's. Before each
test cell, in that cell's own request (``autograder.bridge.tests_kernel``), ``bind`` gives
the notebook's answer names the values the student's kernel holds at that moment, fetched by name across the bridge (``autograder.bridge.protocol``) and
decoded into values of this process (``autograder.bridge.plaindata``). An answer that is a
function becomes a ``StudentFunction``: calling it sends the arguments, as plain data, to
the student's kernel, which runs the function there and sends back the result and any
change the function made to its arguments. So a test compares only values this process
built, with its own, unpatched operations.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from autograder.bridge import plaindata, protocol


def ask(prompt: str) -> dict:
    """Send one request through the grader and return the reply; a reply that is not a
    bridge message is the student's kernel's failure to answer, never this kernel's."""
    from IPython import get_ipython

    try:
        text = get_ipython().kernel.raw_input(prompt)
    except EOFError:  # ipykernel's word for the reply "\x04": the grader relays any text
        return {"failed": "your kernel's answer was the end of input"}
    return read_reply(text)


def read_reply(text: str) -> dict:
    try:
        return protocol.loads(text)
    except Exception as exc:  # noqa: BLE001 - malformed, too deep: the student's answer
        return {"failed": f"your kernel's answer could not be read ({type(exc).__name__})"}


# In a test cell that holds hidden tests, the student's kernel has the hidden test's inputs
# (a function must run on them), and what it says would carry them into the feedback page:
# an exception's message ``ValueError(repr(args))``, the name of an exception class of its
# own, why an answer cannot be read (attack 43, L1). There the tests show none of it
# (``said``): the exception keeps a built-in class, or becomes ``StudentException``.
WITHHELD = (
    "(not shown in a hidden test: what your code said there stays out of the feedback; "
    "call your function yourself to see it)"
)
_in_hidden_test = False


@contextlib.contextmanager
def hidden_test(hidden: bool):
    """While a test cell runs: whether it holds hidden tests (the grader says, from the
    source notebook)."""
    global _in_hidden_test
    _in_hidden_test = bool(hidden)
    try:
        yield
    finally:
        _in_hidden_test = False


def said(text) -> str:
    """Text from the student's side as a test may show it: one bounded line, or, in a hidden
    test, ``WITHHELD``."""
    return WITHHELD if _in_hidden_test else protocol.message_text(text)


# Answers refused as too costly to check in this kernel (one submission's: a test kernel
# serves one), read by the grader at the end for the report.
TOO_COSTLY: list[str] = []


class StudentAnswerError(Exception):
    """The student's kernel could not give a usable answer (it stopped, or sent
    something that is not plain data)."""


class Unreadable:
    """An answer that has no plain-data form: it equals nothing, and says why."""

    def __init__(self, name: str, why: str):
        self.name, self.why = name, why

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__

    def __repr__(self):
        return f"<{self.name}: not a plain value ({self.why})>"


class StudentFunction:
    """A function of the student's notebook, run in the student's kernel when called."""

    def __init__(self, name: str):
        self.__name__ = self.name = name
        self._after: list = []  # the last call's (argument, its state after, as data)

    def __repr__(self):
        return f"<your function {self.name}>"

    def __call__(self, *args, **kwargs):
        try:
            sent = plaindata.encode_values(list(args) + list(kwargs.values()))
            sent_args, sent_kwargs = (
                sent[: len(args)],
                [[k, v] for k, v in zip(kwargs, sent[len(args) :])],
            )
        except plaindata.Unencodable as exc:  # the test's own argument: an authoring bug
            raise TypeError(f"a test cannot pass this to {self.name}: {exc}") from None
        reply = ask(protocol.call_request(self.name, sent_args, sent_kwargs))
        if "raised" in reply:
            raised = reply["raised"]
            raise _exception_class(str(raised.get("type", "Exception")))(
                said(raised.get("message", ""))
            )
        if "ok" not in reply:
            why = said(reply.get("unreadable") or reply.get("failed") or "no answer")
            if "unreadable" in reply:
                why = f"its result cannot be checked ({why})"
            raise StudentAnswerError(why)

        budget = plaindata.Budget()  # one reply, one bound on what reading it may cost
        after_args = _after_states(reply.get("args"), len(args))
        after_kwargs = {
            key: after
            for key, after in _pairs(reply.get("kwargs"))
            if type(key) is str and key in kwargs
        }
        self._after = list(zip(args, after_args)) + [
            (kwargs[k], a) for k, a in after_kwargs.items()
        ]

        def resolve(data):
            # A result that *is* an argument: a model or an optimizer is the test's own
            # object (changed in place below); any other argument crossed by value, so
            # the result is what it became, built afresh.
            if data.get("$") == "arg" and type(data.get("i")) is int and 0 <= data["i"] < len(args):
                original, after = args[data["i"]], after_args[data["i"]]
            elif data.get("$") == "kwarg" and data.get("k") in kwargs:
                original, after = kwargs[data["k"]], after_kwargs.get(data["k"])
            else:
                raise ValueError("an unknown reference")
            if plaindata.in_place(original) or not plaindata.mutable(original):
                return original  # changed in place below, or unchangeable (a number, a tuple)
            if after is None:
                raise ValueError("a reference to an argument whose state did not come back")
            return plaindata.decode(after, budget=budget)

        try:
            result = plaindata.decode(reply["ok"], ref=resolve, budget=budget)
            # Only models and optimizers take the call's changes; every other argument
            # crossed by value, and the test's own object stays as the test made it.
            changed = [(arg, after) for arg, after in zip(args, after_args)]
            changed += [(kwargs[key], after) for key, after in after_kwargs.items()]
            plaindata.update_all_in_place(
                [
                    (arg, after)
                    for arg, after in changed
                    if after is not None and plaindata.in_place(arg)
                ],
                budget,
            )
        except plaindata.TooCostly as exc:
            TOO_COSTLY.append(f"{self.name}(...): {protocol.message_text(exc)}")
            raise StudentAnswerError(
                f"{self.name}(...) sent back an answer too costly to check: {said(exc)}"
            ) from None
        except Exception as exc:  # noqa: BLE001 - malformed data is the student's answer
            raise StudentAnswerError(
                f"{self.name}(...) sent back something that is not plain data ({said(exc)})"
            ) from None
        return result

    def became(self, value):
        """What ``value``, an argument of the last call, became in the student's kernel,
        for a test that checks a function left its argument alone: a new object built
        from its state there, never the test's own (arguments cross by value). A model or
        an optimizer is the test's own object, which took the call's changes; anything
        without a state sent back is ``value`` itself."""
        for argument, after in self._after:
            if argument is value:
                if plaindata.in_place(value) or not plaindata.mutable(value):
                    return value
                # Never the test's own object in place of a state that did not come back:
                # an argument changed into what cannot be sent would pass as unchanged.
                if type(after) is dict and after.get("$") == protocol.UNREADABLE:
                    raise StudentAnswerError(
                        f"{self.name}(...) changed its argument into something that cannot "
                        f"be checked ({said(after.get('why', ''))})"
                    )
                if after is None:
                    raise StudentAnswerError(
                        f"{self.name}(...) did not send back what its argument became"
                    )
                try:
                    return plaindata.decode(after)
                except Exception as exc:  # noqa: BLE001 - the student's data
                    raise StudentAnswerError(
                        f"{self.name}(...) sent back its argument as something "
                        f"that is not plain data ({said(exc)})"
                    ) from None
        return value

    def recorded(self, *args, **kwargs):
        """``(result, record)``: the call as ``self(...)`` makes it, run in the student's
        kernel under a record of each copy between two devices (``student_side.copy_record``),
        the record as plain lists ``[op, from_device, to_device, from_dtype, to_dtype,
        numel]``. Like any answer, a record is what the student's kernel states: a forged one
        can claim what a right answer would do, and that needs no hidden knowledge, so a
        test whose points rest on the record alone grades the method a notebook claims
        (outside attack 52 forged it for 2 points in units 2 and 3; the README's "What it
        does not guarantee"). A record that says it missed some of the
        call's reads or copies (``student_side.UNSEEN``) is the student's failure: the test
        cannot be sure, and says so."""
        global ask
        record, asking = [], ask

        def ask_recording(prompt: str) -> dict:
            reply = asking(protocol.recording(prompt))
            if "ok" in reply:
                record.extend(plain_record(reply.get("record")))
            return reply

        ask = ask_recording  # one request at a time: the test kernel runs one cell
        try:
            result = self(*args, **kwargs)
        finally:
            ask = asking
        from autograder.bridge.student_side import UNSEEN

        if any(entry[0] == UNSEEN for entry in record):
            # The test's points rest on what the record shows; a record that missed some of
            # the call's reads and copies shows nothing sure, so they are withheld.
            raise StudentAnswerError(
                f"{self.name}(...) read or copied tensors where the grader's record of its "
                "copies could not see them (PyTorch's dispatch modes switched off, or its "
                "profiler stopped or already running): what crossed between devices and what "
                "was read on the host cannot be known, so this test gives no points"
            )
        return result, record


def plain_record(data) -> list[list]:
    """A record of copies as sent, checked: at most ``student_side.MAX_RECORD`` entries, each
    five short strings (op, devices, dtypes) and a count (for a ``result`` entry, the index
    of a copy the result's data came from); anything else is not a record."""
    from autograder.bridge.student_side import MAX_RECORD

    def entry(item) -> bool:
        return (
            type(item) is list
            and len(item) == 6
            and all(type(x) is str and len(x) <= 40 for x in item[:5])
            and type(item[5]) is int
            and item[5] >= 0
        )

    if type(data) is not list or len(data) > MAX_RECORD or not all(entry(item) for item in data):
        raise StudentAnswerError("the call's record of copies could not be read")
    return [list(item) for item in data]


def _after_states(states, count: int) -> list:
    """The arguments' states after a call, one per argument (None where none came)."""
    states = states if type(states) is list else []
    return (states + [None] * count)[:count]


def _pairs(items) -> list:
    return (
        [item for item in items if type(item) is list and len(item) == 2]
        if type(items) is list
        else []
    )


# Exceptions a student's function may raise that keep their own class here: the built-in
# ones a test could mean to expect, by name in this fixed table.
BUILTIN_EXCEPTIONS = {
    cls.__name__: cls
    for cls in (
        ArithmeticError,
        AssertionError,
        AttributeError,
        EOFError,
        FileNotFoundError,
        FloatingPointError,
        ImportError,
        IndexError,
        KeyError,
        LookupError,
        MemoryError,
        ModuleNotFoundError,
        NameError,
        NotImplementedError,
        OSError,
        OverflowError,
        RecursionError,
        RuntimeError,
        TimeoutError,
        TypeError,
        UnboundLocalError,
        UnicodeError,
        ValueError,
        ZeroDivisionError,
    )
}
_EXCEPTIONS: dict[str, type] = {}


def _exception_class(name: str) -> type:
    """The exception the student's function raised, as a class of this process: a
    built-in one from the fixed table, any other a new class of that name (never one
    that could stop the kernel or the test: SystemExit, KeyboardInterrupt...)."""
    if name in BUILTIN_EXCEPTIONS:
        return BUILTIN_EXCEPTIONS[name]
    if not name.isidentifier() or len(name) > 60 or _in_hidden_test:
        name = "StudentException"
    if name not in _EXCEPTIONS:
        _EXCEPTIONS[name] = type(name, (Exception,), {"__module__": "your_notebook"})
    return _EXCEPTIONS[name]


# What of an error or a printed text the host keeps (autograder.worker.outputs.VERDICT_CHARS).
TEXT_CHARS = 2000
_bounded = False


def bound_output() -> None:
    """Cut every error and every printed text of this kernel to what the host keeps, before
    it is sent. A test's message may quote a student's answer: a string of 4 M characters
    that ``repr`` writes 10 to a character (U+E0001) made a 40 M-character error, sent
    twice in one message, over the size the host takes from this kernel; the host dropped
    it and waited out the cell, and the points were withheld (attack 20)."""
    global _bounded
    from IPython import get_ipython

    shell = get_ipython()
    if _bounded or shell is None:
        return
    shown = shell._showtraceback

    def bounded(etype, evalue, stb):
        text = str(evalue)
        if len(text) > TEXT_CHARS:
            try:  # the execute reply quotes str(evalue) too
                evalue.args = (_cut(text),)
            except Exception:  # noqa: BLE001 - an error that will not be cut keeps its own text
                pass
        return shown(etype, evalue, [_cut(str(line)) for line in list(stb)[:40]])

    shell._showtraceback = bounded
    for stream in (sys.stdout, sys.stderr):
        write = stream.write
        stream.write = lambda text, write=write: write(_cut(text) if type(text) is str else text)
    _bounded = True


def _cut(text: str) -> str:
    if len(text) <= TEXT_CHARS:
        return text
    return f"{text[:TEXT_CHARS]} ... [{len(text) - TEXT_CHARS} more characters]"


def bind(namespace: dict, names: list[str], functions: Sequence[str] = ()) -> None:
    """Give ``names`` in ``namespace`` the student's current answers (``functions``: those
    the tests call)."""
    bound_output()
    reply = ask(protocol.describe_request(names, functions))
    answers = reply.get("values")
    if type(answers) is not list:
        why = said(reply.get("failed") or reply.get("unreadable") or "no answer")
        for name in names:
            namespace.pop(name, None)
        namespace["_cg_unavailable"] = why  # the checks' answer() says so, not "not defined yet"
        return
    namespace.pop("_cg_unavailable", None)
    given = {}
    budget = plaindata.Budget()  # one reply: all its answers share one bound
    for item in answers:
        if type(item) is list and len(item) == 2 and item[0] in names:
            given[item[0]] = item[1]
    for name in names:
        data = given.get(name, protocol.MISSING)
        if data == protocol.MISSING:
            namespace.pop(name, None)
        elif data == protocol.FUNCTION:
            namespace[name] = StudentFunction(name)
        elif type(data) is dict and data.get("$") == protocol.UNREADABLE:
            namespace[name] = Unreadable(name, said(data.get("why", "")))
        else:
            try:
                namespace[name] = plaindata.decode(data, budget=budget)
            except plaindata.TooCostly as exc:
                TOO_COSTLY.append(f"{name}: {protocol.message_text(exc)}")
                namespace[name] = Unreadable(name, "too costly to check: " + said(exc))
            except Exception as exc:  # noqa: BLE001 - malformed data is the student's answer
                namespace[name] = Unreadable(name, said(exc))
