"""The grader parses no kernel message of more values than it can hold (issue 17)."""

from __future__ import annotations

import json

import pytest
from jupyter_client.session import Session

from autograder.sandbox import messages
from autograder.worker.outputs import content_size


def frames(session: Session, content: dict) -> list[bytes]:
    msg = session.msg("display_data", content)
    _, msg_list = session.feed_identities(session.serialize(msg))
    return msg_list


def test_a_message_of_millions_of_empty_values_is_refused_unparsed():
    session = messages.BoundedSession(key=b"k")
    flood = frames(session, {"data": {"application/json": [{}] * 1_000_000}, "metadata": {}})
    with pytest.raises(messages.TooManyValues):
        session.deserialize(flood)
    fine = frames(session, {"data": {"text/plain": "x" * 1_000_000}, "metadata": {}})
    assert session.deserialize(fine)["content"]["data"]["text/plain"] == "x" * 1_000_000


def test_every_value_counts_against_the_output_budget():
    """An empty dict costs the grader a notebook node, like a number does."""
    assert content_size({"data": {"application/json": [{}] * 1000}}) >= 8000
    assert content_size(json.loads("[[], [], []]")) >= 24


def test_a_message_reads_as_jupyter_client_reads_it_but_its_dates_stay_strings():
    """The dates are the kernel's to write and nobody reads them: they are not parsed."""
    session = messages.BoundedSession(key=b"k")
    content = {"data": {"text/plain": "2026-12-05T05:14:49.000Z"}, "metadata": {}}
    msg_list = frames(session, content)
    ours, theirs = session.deserialize(list(msg_list)), Session(key=b"k").deserialize(msg_list)
    assert isinstance(ours["header"]["date"], str)
    assert type(theirs["header"]["date"]) is not str  # jupyter_client's: a datetime
    theirs["header"]["date"] = ours["header"]["date"]
    assert {k: ours[k] for k in theirs} == theirs
    assert ours["content"] == content


def test_a_message_with_a_wrong_signature_or_seen_before_is_refused():
    session = messages.BoundedSession(key=b"k")
    msg_list = frames(session, {"data": {}, "metadata": {}})
    forged = [b"0" * len(msg_list[0]), *msg_list[1:]]
    with pytest.raises(ValueError, match="Invalid Signature"):
        session.deserialize(forged)
    session.deserialize(list(msg_list))
    with pytest.raises(ValueError, match="Duplicate Signature"):
        session.deserialize(list(msg_list))  # a replay
    with pytest.raises(ValueError, match="Unsigned"):
        session.deserialize([b"", *msg_list[1:]])


@pytest.mark.parametrize(
    "part, value",
    [
        (1, "{}"),  # header: no msg_id, no msg_type
        (1, '{"msg_id": 5, "msg_type": "status"}'),
        (2, '"x"'),  # parent header (attack 36: the grader's own .get raised)
        (3, "[]"),  # metadata
        (4, "null"),  # content
    ],
)
def test_signed_frames_that_are_not_a_jupyter_message_are_refused(part, value):
    """A kernel holds its key, so it can sign any JSON: a part that is not a JSON object
    is refused where the message is parsed, before anything reads it."""
    session = messages.BoundedSession(key=b"k")
    msg_list = frames(session, {"data": {}, "metadata": {}})
    msg_list[part] = value.encode()
    msg_list[0] = session.sign(msg_list[1:5])
    with pytest.raises(messages.NotAMessage):
        session.deserialize(msg_list)


def test_display_rewrites_past_the_cap_are_refused_and_said_once():
    """Where a course allows much output (the bytes of each copy would not stop them), a
    notebook's display updates stop at ``outputs.MAX_REWRITES`` rewritten outputs."""
    from autograder.fates import Kind
    from autograder.worker.outputs import MAX_REWRITES, OutputBudget

    events: list = []
    budget, outputs = OutputBudget(10**12, events), []
    assert budget.allows_rewrites(outputs, MAX_REWRITES)
    assert not budget.allows_rewrites(outputs, 1)
    assert not budget.allows_rewrites(outputs, 1)
    assert [(e.kind, e.reason) for e in events] == [(Kind.OUTPUT_TRUNCATED, "display updates")]
    assert len(outputs) == 1 and "display updates" in outputs[0]["text"]
