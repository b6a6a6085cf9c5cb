"""One output message of 40 frames of 50 MB, each frame under the grader's per-message
cap: zmq holds a whole message before anyone reads it, so whoever receives it first
holds 2 GB."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-output-in-many-frames"
ANSWERS = with_trick(
    """
k = get_ipython().kernel
b = b"x" * 50_000_000
k.session.send(k.iopub_socket, "display_data", {"data": {}, "metadata": {}}, buffers=[b] * 40)
import time
time.sleep(30)
""",
    cell="q4_worked_example",
    base=BASE,
)
# The relay that reads the kernel for the grader ends, the kernel is cut off in that
# cell: its test and the ones after it score 0.
EXPECTED_SCORE = HONEST_SCORE - 1.0  # test_q4_worked_example_form, which passed honestly
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "kernel cut off"
