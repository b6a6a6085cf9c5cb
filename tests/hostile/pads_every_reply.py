"""Answers every test honestly, but pads each of its kernel's replies with 10 M emoji
that no test reads: one JSON string, so it passes every count of values, and 40 MB on the
wire (4 bytes a character) that the grader and the test kernel each parse (attack 20
padded 60 MB into 55 replies: a submission took 20 times as long, and kept full marks;
attack 22 noted that a bound counting characters lets such a string weigh a quarter)."""

from tests.hostile._common import with_trick

WEAKNESS = 13
STUDENT_ID = "trick-pads-every-reply"
ANSWERS = with_trick("""
import IPython.display as _display
from autograder.bridge import protocol

_publish, _pad = _display.publish_display_data, "\U0001f600" * 10_000_000

def _padded(data, *args, **kwargs):
    text = data.get(protocol.REPLY_MIME)
    if text is not None:
        data = {protocol.REPLY_MIME: text[:-1] + ',"pad":"' + _pad + '"}'}
    _publish(data, *args, **kwargs)

_display.publish_display_data = _padded
""")
# The submission's replies share one bound in bytes (Sandbox.max_replies_mb, 256 MB): the
# seventh padded reply passes it, and every later call of the tests fails with why.
EXPECTED_SCORE = 3.0  # the two tests answered before it
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "answers to the tests passed 256 MB in all"
