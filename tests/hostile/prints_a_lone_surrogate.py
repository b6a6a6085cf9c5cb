"""Makes its kernel write messages with ASCII escapes and prints a lone surrogate, which
then arrives in the answer cell's output: the graded notebook could not be written in
UTF-8 and the submission's fate was ``error`` (attack 33)."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 9
STUDENT_ID = "trick-prints-a-lone-surrogate"
ANSWERS = with_trick(r"""
import json

get_ipython().kernel.session.pack = lambda obj: json.dumps(obj, default=str).encode()
print("a lone surrogate: " + chr(0xD800))
""")
# The output is kept, the surrogate shown as U+FFFD; the answers are graded as any others.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
