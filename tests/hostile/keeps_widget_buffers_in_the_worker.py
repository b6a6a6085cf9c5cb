"""Sends widget messages (``comm_msg``) whose binary buffers are the output: nbclient keeps
every buffer, base64, until the notebook ends, and the output cap counted a message's
content only, so 40 buffers of 55 MB, each message under the size cap, held 3 GB in the
grading worker, outside every kernel's limit, graded with no note (attack 31). Buffers count
against the notebook's output cap like any output."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-keeps-widget-buffers-in-the-worker"
ANSWERS = with_trick("""
_k = get_ipython().kernel
_buffer = b"A" * 600_000
for _i in range(4):
    _k.session.send(
        _k.iopub_socket, "comm_msg",
        {"comm_id": f"w{_i}", "data": {"method": "update", "state": {"x": 1}, "buffer_paths": [["x"]]}},
        parent=_k.get_parent(), buffers=[_buffer],
    )
del _k, _buffer, _i
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "output over 1 MB dropped"
