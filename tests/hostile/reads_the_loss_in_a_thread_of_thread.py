"""train_step reads the loss on the host every step in a thread it starts with
``_thread.start_new_thread`` rather than ``threading``: the record follows the threads a
call starts through ``threading`` and its pools, hoping a raw one is not followed
(attack 42)."""

from tests.submissions_gpu_training import SOLUTIONS, STEP, _train_step

HELPERS = """
import _thread
_history = []

def _read(loss, done):
    try:
        _history.append(loss.clone().item())  # a read on the host, every step
    except Exception:
        pass  # meta has no value
    finally:
        done.release()

"""


def _step(start: str) -> str:
    return HELPERS + _train_step(
        *STEP,
        "done = _thread.allocate_lock()",
        "done.acquire()",
        start,
        "done.acquire()  # waited for: the read is this step's",
        "return loss.detach()",
    )


UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-in-a-thread-of-thread"
ANSWERS = {**SOLUTIONS, "q4_train_step": _step("_thread.start_new_thread(_read, (loss, done))")}
# The same read in the call's own thread: test_q4_stays_on_device's 2 points lost.
TWIN = {**SOLUTIONS, "q4_train_step": _step("_read(loss, done)")}
