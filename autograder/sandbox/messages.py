"""How much of one Jupyter message the grader will parse.

A kernel's message is JSON in a few frames, each at most ``Sandbox.max_message_mb``; but
what parsing makes of it is not bounded by its bytes: ``[{},{},...]`` is 3 bytes a value
and becomes a Python dict (and, in nbclient, a notebook node) of a hundred bytes or more
per value. One 60 MB message of empty dicts once held 20 GB in a grading process.
``BoundedSession`` counts a frame's values before parsing it (every value but a string
or a number opens with a bracket or follows a comma, which ``bytes.count`` finds at C
speed) and refuses a message of more than ``MAX_VALUES``: the message is dropped as one
the grader cannot read, and the kernel's run goes on as for any unreadable message.

It also leaves a message's dates as the kernel wrote them (strings): jupyter_client parses
every string of a header that looks like a date, twice a message, which was a twentieth of
a grading worker's CPU time. Nothing of the grader reads a kernel's dates, which are the
kernel's to choose anyway; nbclient's cell timings then read the grader's own clock.

And every string it parses is one that UTF-8 can carry (``autograder.utf8``): a lone
surrogate, which a kernel can write as a JSON escape, is U+FFFD before the grader reads it.
"""

from __future__ import annotations

from hmac import compare_digest

from jupyter_client.adapter import adapt
from jupyter_client.session import Session

from autograder import utf8

MAX_VALUES = 500_000  # JSON values in one message (the bridge's replies have the same bound)
WIRE_BYTES = "wire_bytes"  # a parsed message's key: what its frames weigh (see below)


class TooManyValues(ValueError):
    """A message with more values than the grader parses."""


def values_in(frame) -> int:
    """About how many JSON values ``frame`` holds (an upper bound for lists and objects)."""
    data = bytes(frame)
    return data.count(b",") + data.count(b"[") + data.count(b"{")


def wire_weight(frame: bytes) -> int:
    """``frame``'s bytes, and 2 more for each that is not UTF-8 (an upper bound: a U+FFFD
    already in the text counts as one too)."""
    if frame.isascii():
        return len(frame)
    try:
        frame.decode("utf-8")
    except UnicodeDecodeError:
        return len(frame) + 2 * frame.decode("utf-8", "replace").count("\ufffd")
    return len(frame)


class NotAMessage(ValueError):
    """Signed frames that are not a Jupyter message: a part is not a JSON object."""


class BoundedSession(Session):
    """jupyter_client's Session, refusing messages of more than ``MAX_VALUES`` values."""

    def deserialize(self, msg_list, content=True, copy=True):
        # The frames after the signature: header, parent header, metadata, content.
        frames = [bytes(m.bytes) if hasattr(m, "bytes") else m for m in msg_list[1:5]]
        count = sum(values_in(frame) for frame in frames)
        if count > MAX_VALUES:
            raise TooManyValues(
                f"a message of about {count:,} values (the grader reads at most {MAX_VALUES:,})"
            )
        msg = self._deserialize(msg_list, content)
        if any(utf8.may_hold_surrogates(frame) for frame in frames):
            utf8.mend(msg)
        # What a bound on bytes received must count: the bytes on the wire (a character of
        # a string can be 4), and 2 more for each byte that is not UTF-8, which is read as
        # U+FFFD, 3 bytes when passed on to the test kernel (raw 0xFF bytes weighed a third
        # of what they cost the grader: attack 35).
        msg[WIRE_BYTES] = sum(wire_weight(frame) for frame in frames)
        return msg

    def _deserialize(self, msg_list, content: bool) -> dict:
        """``Session.deserialize`` (jupyter_client 8) without its ``extract_dates``: the same
        signature and replay checks, the same message."""
        minlen = 5
        head = [bytes(m.bytes) if hasattr(m, "bytes") else m for m in msg_list[:minlen]]
        if self.auth is not None:
            signature = head[0]
            if not signature:
                raise ValueError("Unsigned Message")
            if signature in self.digest_history:
                raise ValueError(f"Duplicate Signature: {signature!r}")
            if content:
                self._add_digest(signature)
            if not compare_digest(signature, self.sign(head[1:5])):
                raise ValueError(f"Invalid Signature: {signature!r}")
        if len(head) < minlen:
            raise TypeError(f"malformed message, must have at least {minlen} elements")
        header = self.unpack(head[1])
        buffers = [memoryview(b) for b in msg_list[minlen:]]
        if buffers and buffers[0].shape is None:  # as jupyter_client: pyzmq #646
            buffers = [memoryview(bytes(b.bytes)) for b in msg_list[minlen:]]
        parts = [header, self.unpack(head[2]), self.unpack(head[3])]
        if content:
            parts.append(self.unpack(head[4]))
        # A kernel holds its key and can sign any JSON: a header, parent header, metadata
        # or content that is no object is no message (attack 36: a parent header "x" made
        # the grader's own ``.get`` raise, and the submission's fate was the grader's error).
        if not all(type(part) is dict for part in parts) or not all(
            type(header.get(key)) is str for key in ("msg_id", "msg_type")
        ):
            raise NotAMessage("signed frames that are not a Jupyter message")
        message = {
            "header": header,
            "msg_id": header["msg_id"],
            "msg_type": header["msg_type"],
            "parent_header": parts[1],
            "metadata": parts[2],
            "content": parts[3] if content else head[4],
            "buffers": buffers,
        }
        return adapt(message)
