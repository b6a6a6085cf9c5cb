"""train_step reads the loss on the host every step with the dispatch modes off, just after
asking a profiler to start in a way that fails (``_prepare_trace`` on no profiler): the
record's profiler stood aside for the call's own profiler, and waited for an exit that
never came (attack 43)."""

from tests.hostile._common import reading_the_loss
from tests.submissions_gpu_training import SOLUTIONS

UNSEEN = """import contextlib
from torch.utils._python_dispatch import _disable_current_modes

@contextlib.contextmanager
def _unwatched():
    try:
        torch.autograd.profiler.profile._prepare_trace(object())  # fails to start
    except Exception:
        pass
    with _disable_current_modes():
        yield

"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-after-a-profiler-that-never-started"
ANSWERS = {**SOLUTIONS, "q4_train_step": UNSEEN + reading_the_loss("_unwatched()")}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": "import contextlib\n" + reading_the_loss("contextlib.nullcontext()"),
}
