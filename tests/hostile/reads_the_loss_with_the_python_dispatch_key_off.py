"""train_step reads the loss on the host every step with Tensor.item as it was before the
record's wrappers, inside ``torch._C._DisableTorchDispatch()``, the C++ guard that turns
Python's dispatch key off: the record's dispatch mode does not see the read (attack 41)."""

from tests.submissions_gpu_training import SOLUTIONS

STEP = """
_item = torch.Tensor.item
_history = []

def train_step(model, optimizer, inputs, labels):
    device = next(model.parameters()).device
    inputs = inputs.to(device)
    labels = labels.to(device=device, dtype=torch.int64)
    loss = F.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with {guard}:
        try:
            _history.append(_item(loss))  # a read on the host, every step
        except Exception:
            pass  # meta has no value
    return loss.detach()
"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-with-the-python-dispatch-key-off"
ANSWERS = {**SOLUTIONS, "q4_train_step": STEP.format(guard="torch._C._DisableTorchDispatch()")}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": "import contextlib\n" + STEP.format(guard="contextlib.nullcontext()"),
}
