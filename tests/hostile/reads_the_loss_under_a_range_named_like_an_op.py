"""train_step reads the loss on the host every step with the dispatch modes off, inside a
profiler range it names ``aten::log_step``: the profiler's second look skips what runs
inside another op's kernel, hoping a range named like an op passes for one (attack 42)."""

from tests.hostile._common import reading_the_loss
from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-under-a-range-named-like-an-op"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": "from torch.utils._python_dispatch import _disable_current_modes\n"
    + reading_the_loss(
        'torch.autograd.profiler.record_function("aten::log_step"), _disable_current_modes()'
    ),
}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": "import contextlib\n" + reading_the_loss("contextlib.nullcontext()"),
}
