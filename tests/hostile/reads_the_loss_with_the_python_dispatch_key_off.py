"""train_step reads the loss on the host every step with Tensor.item as it was before the
record's wrappers, inside ``torch._C._DisableTorchDispatch()``, the C++ guard that turns
Python's dispatch key off: the record's dispatch mode does not see the read (attack 41)."""

from tests.hostile._common import reading_the_loss
from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-with-the-python-dispatch-key-off"
ANSWERS = {**SOLUTIONS, "q4_train_step": reading_the_loss("torch._C._DisableTorchDispatch()")}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": "import contextlib\n" + reading_the_loss("contextlib.nullcontext()"),
}
