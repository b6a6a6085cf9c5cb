"""train_step reads the loss on the host every step from inside ``torch.load``: it unpickles
a blob of its own whose ``__reduce__`` calls back into the notebook, in the window where the
record counts only what ``torch.load`` brings to a device (attack 42)."""

from tests.submissions_gpu_training import SOLUTIONS

STEP = """
import io as _io
_history = []

def _read(loss):
    try:
        _history.append(loss.item())  # a read on the host, every step
    except Exception:
        pass  # meta has no value

class _Later:
    def __init__(self, loss):
        self.loss = loss
    def __reduce__(self):
        return (_read, (self.loss,))

def train_step(model, optimizer, inputs, labels):
    device = next(model.parameters()).device
    inputs = inputs.to(device)
    labels = labels.to(device=device, dtype=torch.int64)
    loss = F.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {read}
    return loss.detach()
"""
INSIDE = """blob = _io.BytesIO()
    torch.save(_Later(loss.detach()), blob)
    blob.seek(0)
    torch.load(blob, weights_only=False)"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-inside-torch-load"
ANSWERS = {**SOLUTIONS, "q4_train_step": STEP.format(read=INSIDE)}
# The same read, outside torch.load: test_q4_stays_on_device's 2 points lost.
TWIN = {**SOLUTIONS, "q4_train_step": STEP.format(read="_read(loss.detach())")}
