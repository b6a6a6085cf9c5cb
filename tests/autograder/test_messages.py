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
