"""train_step reads the loss on the host every step from inside ``torch.load``: it unpickles
a blob it made before any call, whose ``__reduce__`` calls back into the notebook, in the
window where the record counts only what ``torch.load`` brings to a device (attack 42)."""

from tests.submissions_gpu_training import SOLUTIONS, STEP, _train_step

HELPERS = """
import io as _io
_history, _loss = [], [None]

def _read():
    try:
        _history.append(_loss[0].item())  # a read on the host, every step
    except Exception:
        pass  # meta has no value

class _Later:
    def __reduce__(self):
        return (_read, ())

_blob = _io.BytesIO()
torch.save(_Later(), _blob)
_BLOB = _blob.getvalue()

"""


def _step(read: str) -> str:
    return HELPERS + _train_step(*STEP, "_loss[0] = loss.detach()", read, "return loss.detach()")


UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-inside-torch-load"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": _step("torch.load(_io.BytesIO(_BLOB), weights_only=False)"),
}
# The same read, outside torch.load: test_q4_stays_on_device's 2 points lost.
TWIN = {**SOLUTIONS, "q4_train_step": _step("_read()")}
