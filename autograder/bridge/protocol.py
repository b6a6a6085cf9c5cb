"""The bridge's messages: how the test kernel asks the student's kernel for answers.

Three processes take part, and this module is the only one that knows the messages'
shape (values inside them are ``autograder.bridge.plaindata``'s):

    test kernel (trusted) --request--> grader (host) --request--> student's kernel
    test kernel <--reply-- grader <--reply-- student's kernel

- The test kernel sends a request as the prompt of a Jupyter ``input_request`` (the
  stdin channel, the protocol's own way for a running cell to ask its client) and reads
  the reply as the answer to it.
- The grader forwards the text to the student's kernel (a ``REQUEST_MSG`` shell message),
  where ``autograder.bridge.student_side`` answers it, and forwards the reply back. It parses neither: it only bounds their size
  and the time they take, and answers ``failed`` itself when the student's kernel cannot.
- Requests carry only what the tests built (arguments); they never carry an expected
  value, and the test's source never leaves the test kernel.

Requests::

    {"op": "describe", "names": [name, ...], "functions": [name, ...]}
                                        functions: the names a solution binds with def,
                                        whose answer is called: any callable answer of
                                        those is a function (an nn.Module too)
    {"op": "call", "name": name, "args": [data], "kwargs": [[key, data]]}
    {"op": "call", ..., "record": true}  the same call, run under a record of each copy
                                        between two devices (student_side.copy_record)

Replies::

    {"values": [[name, answer], ...]}   answer: data, or {"$": "function"},
                                        {"$": "missing"}, {"$": "unreadable", "why": text}
    {"ok": data, "args": [data or null], "kwargs": [[key, data or null]]}
                                        (the arguments' state after the call, for those
                                        a call can change in place; a result that *is*
                                        an argument is {"$": "arg", "i": i} or
                                        {"$": "kwarg", "k": key})
                                        and, for a call with "record": true,
                                        "record": [[op, from_device, to_device,
                                        from_dtype, to_dtype, numel], ...]
    {"raised": {"type": name, "message": text}}
    {"unreadable": text}                the result has no plain-data form
    {"failed": text}                    from the grader: no answer could be had
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from autograder import utf8

# What the grader puts in front of a request (the prompt of the input_request), so that
# an input() a test author forgot can never be mistaken for one.
PREFIX = "course-grade/1 "
# Mime type of the student kernel's reply (a display_data output of the bridge call).
REPLY_MIME = "application/x-course-grade-reply"
# How the grader hands a request to the student's kernel: a shell message of its own,
# {"prompt": <the request's text>}, answered by ``student_kernel.BridgeKernel`` with the
# display above, then its idle status (no busy status, no shell reply), never an execute.
REQUEST_MSG = "course_grade_request"
# The test kernel reads the answers in the same execute request as the test cell that
# needs them: the request's metadata says {BIND_KEY: {"names": [...], "functions": [...]}}
# (``tests_kernel.TestsKernel``), and a reply with BIND_FAILED true says that reading them
# failed and the cell did not run.
BIND_KEY = "course_grade_bind"
BIND_FAILED = "course_grade_bind_failed"
# A test cell that holds hidden tests: its request's metadata says {HIDDEN_KEY: true}, and
# the tests there show nothing the student's kernel said (``trusted_side.said``).
HIDDEN_KEY = "course_grade_hidden"
# What makes an ipykernel each of those kernels (the modules are named here so that the
# sandbox can start one without importing ipykernel itself).
_PACKAGE = __name__.rpartition(".")[0]
STUDENT_KERNEL_OPTION = f"--IPKernelApp.kernel_class={_PACKAGE}.student_kernel.BridgeKernel"
TESTS_KERNEL_OPTION = f"--IPKernelApp.kernel_class={_PACKAGE}.tests_kernel.TestsKernel"
MAX_MESSAGE_CHARS = 200
MAX_NODES = 500_000

MISSING = {"$": "missing"}
FUNCTION = {"$": "function"}
UNREADABLE = "unreadable"  # {"$": UNREADABLE, "why": ...}: an answer, or an argument's state
# after a call, that could not be sent (an "unchanged" test must not take it as unchanged)


def dumps(message: dict) -> str:
    return json.dumps(message, allow_nan=False, separators=(",", ":"))


def loads(text: str) -> dict:
    """A message, refused when it is not an object or holds more than ``MAX_NODES``
    values in all (decoding that many would cost the test kernel more than a test's time).
    Its strings are ones UTF-8 can carry (``autograder.utf8``): a test quotes them in its
    failure messages, which must reach the grader."""
    message = json.loads(text, parse_float=_float, parse_int=_int)
    if type(message) is not dict:
        raise ValueError("a bridge message must be a JSON object")
    stack, left = [message], MAX_NODES
    while stack:
        item = stack.pop()
        left -= 1
        if left < 0:
            raise ValueError(f"a bridge message may hold {MAX_NODES} values")
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return utf8.mend(message) if utf8.may_hold_surrogates(text) else message


def _bounded(convert, longest: int):
    """``convert`` for a JSON number token, refusing one longer than ``longest``
    characters before converting it: no plain value is written that long."""

    def number(token: str):
        if len(token) > longest:
            raise ValueError(f"a number of {len(token)} characters is no plain value")
        return convert(token)

    return number


# Python writes any float in at most 24 characters; turning one of hundreds of digits into
# the nearest float costs milliseconds: ~60 MB of them in one reply cost the test kernel
# 2.2 CPU s before the reply was read (attack 21).
MAX_FLOAT_CHARS = 64
# plaindata writes a bare int only below 2**53 (16 digits; a larger one is a string); each
# of 4,300 digits cost the test kernel 195 us to quote in a message (attack 22).
MAX_INT_CHARS = 20
_float = _bounded(float, MAX_FLOAT_CHARS)
_int = _bounded(int, MAX_INT_CHARS)


def describe_request(names: list[str], functions: Sequence[str] = ()) -> str:
    return PREFIX + dumps({"op": "describe", "names": list(names), "functions": list(functions)})


def call_request(name: str, args: list, kwargs: list) -> str:
    return PREFIX + dumps({"op": "call", "name": name, "args": args, "kwargs": kwargs})


def recording(prompt: str) -> str:
    """A call request, asking also for the record of the copies the call makes."""
    return PREFIX + dumps({**request_body(prompt), "record": True})


def is_request(prompt: str) -> bool:
    return prompt.startswith(PREFIX)


def is_describe(prompt: str) -> bool:
    """A request that only reads answers (the grader relays requests unparsed; this looks
    at the test kernel's own, trusted, prefix)."""
    return prompt.startswith(PREFIX + '{"op":"describe"')


def request_body(prompt: str) -> dict:
    return loads(prompt[len(PREFIX) :])


def failed(why: str) -> str:
    return dumps({"failed": why[: MAX_MESSAGE_CHARS * 2]})


def message_text(text) -> str:
    """A message from the student's side, as one bounded line of text."""
    return " ".join(str(text).split())[:MAX_MESSAGE_CHARS]
