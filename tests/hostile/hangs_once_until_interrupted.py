"""A function whose first call hangs until the grader interrupts it; later calls answer
right. The interrupt must stop the call and the kernel must be kept: only the test that
made the call loses its points. Beside ``forges_its_calls_reply_and_runs_on.py``: the
grader's proof that a call stopped (a request sent after the interrupt, answered by
the kernel's main thread) must come from a kernel that did stop."""

from tests.hostile._common import HONEST_SCORE, with_trick
from tests.submissions_gpu_tensors import POINTS

WEAKNESS = 5
STUDENT_ID = "trick-hangs-once-until-interrupted"
ANSWERS = with_trick("""
import time
_calls, _right = [], prepare_batch
def prepare_batch(batch, model):
    _calls.append(1)
    while len(_calls) == 1:  # a KeyboardInterrupt ends it
        time.sleep(0.01)
    return _right(batch, model)
""")
EXPECTED_SCORE = HONEST_SCORE - POINTS["test_q1_shape"]  # the first test to call it
EXPECTED_FATE = "timed out"
EXPECTED_DETAIL = "timed out: (a test's call)"
