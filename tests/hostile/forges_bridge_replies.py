"""Replaces the student's end of the bridge: every request gets a forged reply that
claims right-looking answers, references to arguments that do not exist, unknown kinds
and nesting deep enough to break a naive decoder."""

from tests.hostile._common import with_trick

WEAKNESS = 3
STUDENT_ID = "trick-forges-bridge-replies"
ANSWERS = with_trick("""
import json
from autograder.bridge import protocol, student_side
from IPython.display import publish_display_data

def _forged(shell, prompt):
    request = json.loads(prompt[len(protocol.PREFIX):])
    deep = 0
    for _ in range(100_000):
        deep = [deep]
    if request["op"] == "describe":
        values = [[n, {"$": "pickle", "v": "gASV"}] for n in request["names"]]
        values[0] = [request["names"][0], {"$": "arg", "i": 7}]
        reply = {"values": values}
    else:
        reply = {"ok": {"$": "arg", "i": 99}, "args": [{"$": "tensor", "dtype": "os.system"}]}
    text = json.dumps(reply)[:-1] + ', "deep": ' + "[" * 50_000 + "]" * 50_000 + "}"
    publish_display_data({protocol.REPLY_MIME: text})

student_side.serve = _forged
""")
# Every forged reply decodes to nothing usable: the tests fail as for no answers at all,
# and the test kernel is unharmed (the fate is graded, not "needs review").
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
