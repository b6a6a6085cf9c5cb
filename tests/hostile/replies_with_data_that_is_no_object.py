"""Before each reply of a test's call, its kernel sends a signed display whose ``data`` is
the string "x": the grader's end of the bridge read ``data.get(...)`` and raised, and the
fate was ``error``, the grader's own failure, with no score (outside attack 37). Now such
a display is no answer, and any message of a call the grader cannot read fails that call."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 4
STUDENT_ID = "trick-replies-with-data-that-is-no-object"
ANSWERS = with_trick("""
_session = get_ipython().kernel.session
_send = _session.send
def _with_a_string_first(stream, msg, content=None, parent=None, *args, **kwargs):
    whole = isinstance(msg, dict)  # ipykernel's displays send a whole message
    kind = msg.get("msg_type") if whole else msg
    data = (msg.get("content") if whole else content or {}).get("data", {})
    if kind == "display_data" and "application/x-course-grade-reply" in data:
        _send(stream, "display_data", {"data": "x", "metadata": {}},
              msg.get("parent_header") if whole else parent, ident=kwargs.get("ident"))
    return _send(stream, msg, content, parent, *args, **kwargs)
_session.send = _with_a_string_first
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
