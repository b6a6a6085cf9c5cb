"""Drops the "idle" that ends its first cell's output (its kernel's ``_publish_status``,
once). A grader on a loaded machine sees the same of an honest notebook: a kernel's
output channel is a zmq PUB socket, which drops what passes its queue, the idle
included, when a cell writes faster than the grader reads (a loaded CI machine, 0.13.1). nbgrader raised
4 s after the reply (``Execute.iopub_timeout``), the student's kernel was stopped and
every later test scored 0; now the cell keeps what came, says the rest did not arrive,
and grading goes on: what the grade needs of an answer cell came in its reply."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-drops-its-own-idle"
ANSWERS = with_trick("""
_k = get_ipython().kernel
def _publish_status(status, *args, _publish=_k._publish_status, **kwargs):
    if status != "idle":
        return _publish(status, *args, **kwargs)
    del _k._publish_status  # once: the class's own method again
_k._publish_status = _publish_status
del _publish_status
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "output lost: the end of q1_prepare_batch's output did not arrive"
