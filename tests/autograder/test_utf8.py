"""Every string read from a kernel is one UTF-8 can carry (attack 33: a lone surrogate in
a reply or an output made a failed test pass, or a submission's fate `error`)."""

from __future__ import annotations

import json

import nbformat
import pytest
from jupyter_client.session import Session

from autograder import utf8
from autograder.bridge import protocol
from autograder.sandbox import messages

LONE = "\ud800"


def test_lone_surrogates_become_the_replacement_character_and_pairs_stay():
    value = json.loads('{"a\\udc00": ["x\\ud800y", {"k": "\\udfff"}], "emoji": "\\ud83d\\ude00"}')
    assert utf8.mend(value) == {"a\ufffd": ["x\ufffdy", {"k": "\ufffd"}], "emoji": "\U0001f600"}
    assert utf8.mend("é" + LONE) == "é\ufffd"


def test_a_value_nested_past_pythons_stack_is_mended():
    deep = inner = []
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    inner.append(LONE)
    utf8.mend(deep)
    assert inner == ["\ufffd"]


@pytest.mark.parametrize(
    "text, may",
    [
        ('{"a": "plain é \\u00e9 \\\\u0041"}', False),
        ('{"a": "\\ud800"}', True),
        ('{"a": "\\uDFFF"}', True),
        ('{"a": "' + LONE + '"}', True),
    ],
)
def test_only_json_that_may_hold_one_is_walked(text, may):
    assert utf8.may_hold_surrogates(text) is may
    if not text.isascii() and not may:
        return
    if LONE not in text:
        assert utf8.may_hold_surrogates(text.encode()) is may


def test_a_bridge_reply_with_an_escaped_lone_surrogate_reads_as_text_utf8_carries():
    reply = protocol.loads('{"failed": "\\ud800 and \\udfff"}')
    assert reply == {"failed": "\ufffd and \ufffd"}
    reply["failed"].encode("utf-8")


def test_a_kernels_message_with_one_is_mended_and_its_output_can_be_written(tmp_path):
    sender = Session(key=b"k")
    sender.pack = lambda obj: json.dumps(obj, default=str).encode()  # escapes, as a student may
    content = {"name": "stdout", "text": "half a pair: " + LONE}
    msg_list = sender.serialize(sender.msg("stream", content))
    _, msg_list = sender.feed_identities(msg_list)
    msg = messages.BoundedSession(key=b"k").deserialize(msg_list)
    assert msg["content"]["text"] == "half a pair: \ufffd"
    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "print()",
            outputs=[nbformat.v4.new_output("stream", name="stdout", text=msg["content"]["text"])],
        )
    )
    nbformat.write(nb, tmp_path / "graded.ipynb")  # raised UnicodeEncodeError before
