"""While a test calls it, a function sends a signed IOPub message whose parent header is
the string "x" (its kernel holds the key, so it can sign any JSON). The grader's end of
the bridge read ``parent_header.get(...)`` and raised; nothing caught it and the
submission's fate was ``error``, the grader's own failure, graded again on every run with
no score (outside attack 36, in units 1 and 2). Now a message whose parts are not JSON
objects is refused where it is parsed, and the call goes on."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 4
STUDENT_ID = "trick-signs-a-parent-that-is-no-object"
ANSWERS = with_trick("""
_right = prepare_batch
def prepare_batch(batch, model):
    k = get_ipython().kernel
    k.session.send(k.iopub_socket, {"header": k.session.msg_header("display_data"),
                                    "parent_header": "x", "metadata": {}, "content": {}})
    return _right(batch, model)
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
