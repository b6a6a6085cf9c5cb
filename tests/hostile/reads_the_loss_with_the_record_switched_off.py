"""train_step reads the loss on the host every step (a GPU sync each time), with Tensor.item
as it was before the record's wrappers, inside PyTorch's ``_disable_current_modes``: the
record's dispatch mode does not see the read, hoping the test finds none (attack 41)."""

from tests.hostile._common import reading_the_loss
from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-with-the-record-switched-off"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": "from torch.utils._python_dispatch import _disable_current_modes\n"
    + reading_the_loss("_disable_current_modes()"),
}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": "import contextlib\n" + reading_the_loss("contextlib.nullcontext()"),
}
