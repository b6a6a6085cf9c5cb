"""Makes its kernel write messages with ASCII escapes, so that a reply's text can hold a
lone surrogate on the grader's side (``"\\ud800"`` decodes to one): passing that text on
to the test kernel raised UnicodeEncodeError in the grader, and the submission's fate
was ``error`` (attack 33)."""

from tests.hostile._common import with_trick

WEAKNESS = 3
STUDENT_ID = "trick-replies-in-text-no-utf8-carries"
ANSWERS = with_trick(r"""
import json
from autograder.bridge import protocol, student_side
from IPython.display import publish_display_data

get_ipython().kernel.session.pack = lambda obj: json.dumps(obj, default=str).encode()

def _surrogate(shell, prompt):
    publish_display_data({protocol.REPLY_MIME: '{"failed": "x"}' + chr(0xD800)})

student_side.serve = _surrogate
""")
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
