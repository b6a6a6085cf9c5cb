"""train_step reads the loss on the host every step from inside ``torch.load``, which a
recorded call runs with PyTorch's weights-only unpickler: the notebook declared its own
reader safe to load (``torch.serialization.add_safe_globals``), and the unpickler called
it, where the record counts only what the load brings to a device (attack 43)."""

from tests.submissions_gpu_training import SOLUTIONS, STEP, _train_step

HELPERS = """
import io as _io
_history, _loss = [], [None]

def _read():
    try:
        _history.append(_loss[0].item())  # a read on the host, every step
    except Exception:
        pass  # meta has no value
    return 0

class _Later:
    def __reduce__(self):
        return (_read, ())

_blob = _io.BytesIO()
torch.save(_Later(), _blob)
_BLOB = _blob.getvalue()
torch.serialization.add_safe_globals([_read])

"""


def _step(read: str) -> str:
    return HELPERS + _train_step(*STEP, "_loss[0] = loss.detach()", read, "return loss.detach()")


UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-in-a-function-declared-safe-to-load"
ANSWERS = {**SOLUTIONS, "q4_train_step": _step("torch.load(_io.BytesIO(_BLOB))")}
# The same read, outside torch.load: test_q4_stays_on_device's 2 points lost.
TWIN = {**SOLUTIONS, "q4_train_step": _step("_read()")}
