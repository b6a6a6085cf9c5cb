"""train_step reads the loss on the host every step (a GPU sync each time), with Tensor.item
as it was before the record's wrappers, inside PyTorch's ``_disable_current_modes``: the
record's dispatch mode does not see the read, hoping the test finds none (attack 41)."""

from tests.submissions_gpu_training import SOLUTIONS

READ = """
        try:
            _history.append(_item(loss))  # a read on the host, every step
        except Exception:
            pass  # meta has no value
"""
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
{read}
    return loss.detach()
"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-with-the-record-switched-off"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": "from torch.utils._python_dispatch import _disable_current_modes\n"
    + STEP.format(read="    with _disable_current_modes():" + READ),
}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {**SOLUTIONS, "q4_train_step": STEP.format(read="    if True:" + READ)}
