"""Runs in the trusted test kernel: the student's answers, as the test cells see them.

The test kernel runs the instructor's cells of the source notebook (set-up, checks and
every test cell, hidden tests included) and never a line of the student's. Before each
test cell, ``bind`` gives the notebook's answer names the values the student's kernel
holds at that moment, fetched by name across the bridge (``autograder.protocol``) and
decoded into values of this process (``autograder.plaindata``). An answer that is a
function becomes a ``StudentFunction``: calling it sends the arguments, as plain data, to
the student's kernel, which runs the function there and sends back the result and any
change the function made to its arguments. So a test compares only values this process
built, with its own, unpatched operations.
"""
from __future__ import annotations

import builtins
import os
import random
import shutil
import sys

from autograder import plaindata, protocol

_FRESH: dict = {}  # the state a fresh test kernel starts each submission with


def ask(prompt: str) -> dict:
    """Send one request through the grader and return the reply; a reply that is not a
    bridge message is the student's kernel's failure to answer, never this kernel's."""
    from IPython import get_ipython

    return read_reply(get_ipython().kernel.raw_input(prompt))


def read_reply(text: str) -> dict:
    try:
        return protocol.loads(text)
    except Exception as exc:  # noqa: BLE001 - malformed, too deep: the student's answer
        return {"failed": f"your kernel's answer could not be read ({type(exc).__name__})"}


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

    def __repr__(self):
        return f"<your function {self.name}>"

    def __call__(self, *args, **kwargs):
        try:
            sent = plaindata.encode_values(list(args) + list(kwargs.values()))
            sent_args, sent_kwargs = sent[:len(args)], [[k, v] for k, v in zip(kwargs, sent[len(args):])]
        except plaindata.Unencodable as exc:  # the test's own argument: an authoring bug
            raise TypeError(f"a test cannot pass this to {self.name}: {exc}") from None
        reply = ask(protocol.call_request(self.name, sent_args, sent_kwargs))
        if "raised" in reply:
            raised = reply["raised"]
            raise _exception_class(str(raised.get("type", "Exception")))(
                protocol.message_text(raised.get("message", "")))
        if "ok" not in reply:
            why = reply.get("unreadable") or reply.get("failed") or "no answer"
            if "unreadable" in reply:
                why = f"its result cannot be checked ({protocol.message_text(why)})"
            raise StudentAnswerError(protocol.message_text(why))

        def resolve(data):
            if data.get("$") == "arg" and type(data.get("i")) is int and 0 <= data["i"] < len(args):
                return args[data["i"]]
            if data.get("$") == "kwarg" and data.get("k") in kwargs:
                return kwargs[data["k"]]
            raise ValueError("an unknown reference")

        try:
            result = plaindata.decode(reply["ok"], ref=resolve)
            for arg, after in zip(args, reply.get("args") or []):
                if after is not None and plaindata.mutable(arg):
                    plaindata.update_in_place(arg, after)
            for key, after in reply.get("kwargs") or []:
                if after is not None and key in kwargs and plaindata.mutable(kwargs[key]):
                    plaindata.update_in_place(kwargs[key], after)
        except Exception as exc:  # noqa: BLE001 - malformed data is the student's answer
            raise StudentAnswerError(
                f"{self.name}(...) sent back something that is not plain data "
                f"({protocol.message_text(exc)})") from None
        return result

    def recorded(self, *args, **kwargs):
        """``(result, record)``: the call as ``self(...)`` makes it, run in the student's
        kernel under a record of each copy between two devices (``student_side.copy_record``),
        the record as plain lists ``[op, from_device, to_device, from_dtype, to_dtype,
        numel]``. Like any answer, a record is what the student's kernel states: a forged one
        can only claim what a right answer would do."""
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
        return result, record


def plain_record(data) -> list[list]:
    """A record of copies as sent, checked: at most ``student_side.MAX_RECORD`` entries, each
    five short strings (op, devices, dtypes) and a count; anything else is not a record."""
    from autograder.student_side import MAX_RECORD

    def entry(item) -> bool:
        return (type(item) is list and len(item) == 6
                and all(type(x) is str and len(x) <= 40 for x in item[:5])
                and type(item[5]) is int and item[5] >= 0)

    if type(data) is not list or len(data) > MAX_RECORD or not all(entry(item) for item in data):
        raise StudentAnswerError("the call's record of copies could not be read")
    return [list(item) for item in data]


_EXCEPTIONS: dict[str, type] = {}


def _exception_class(name: str) -> type:
    """The exception the student's function raised, as a class of this process."""
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        return builtin
    if not name.isidentifier() or len(name) > 60:
        name = "StudentException"
    if name not in _EXCEPTIONS:
        _EXCEPTIONS[name] = type(name, (Exception,), {"__module__": "your_notebook"})
    return _EXCEPTIONS[name]


def bind(namespace: dict, names: list[str]) -> None:
    """Give ``names`` in ``namespace`` the student's current answers."""
    reply = ask(protocol.describe_request(names))
    answers = reply.get("values")
    if type(answers) is not list:
        why = protocol.message_text(reply.get("failed") or reply.get("unreadable") or "no answer")
        for name in names:
            namespace.pop(name, None)
        namespace["_cg_unavailable"] = why
        return
    given = {}
    for item in answers:
        if type(item) is list and len(item) == 2 and item[0] in names:
            given[item[0]] = item[1]
    for name in names:
        data = given.get(name, protocol.MISSING)
        if data == protocol.MISSING:
            namespace.pop(name, None)
        elif data == protocol.FUNCTION:
            namespace[name] = StudentFunction(name)
        elif type(data) is dict and data.get("$") == "unreadable":
            namespace[name] = Unreadable(name, protocol.message_text(data.get("why", "")))
        else:
            try:
                namespace[name] = plaindata.decode(data)
            except Exception as exc:  # noqa: BLE001 - malformed data is the student's answer
                namespace[name] = Unreadable(name, protocol.message_text(exc))


def fresh_start(shell, staging: str, work: str) -> None:
    """Begin a submission as a freshly started test kernel would.

    The first call notes the kernel's starting state; each later call empties the user
    namespace, puts that state back and gives the tests a new working folder filled
    from the staging folder. Imported modules stay loaded: that is what a warm kernel is
    for, and only trusted code ever ran here.
    """
    import numpy
    import torch

    if not _FRESH:
        _FRESH.update(path=list(sys.path), random=random.getstate(),
                      numpy=numpy.random.get_state(), torch=torch.get_rng_state(),
                      dtype=torch.get_default_dtype(), grad=torch.is_grad_enabled(),
                      threads=torch.get_num_threads())
    else:
        shell.reset(new_session=False)
        sys.path[:] = _FRESH["path"]
        random.setstate(_FRESH["random"])
        numpy.random.set_state(_FRESH["numpy"])
        torch.set_rng_state(_FRESH["torch"])
        torch.set_default_dtype(_FRESH["dtype"])
        torch.set_grad_enabled(_FRESH["grad"])
        torch.set_num_threads(_FRESH["threads"])
    os.chdir("/")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(staging, work, symlinks=True) if os.path.isdir(staging) else os.makedirs(work)
    os.chdir(work)
