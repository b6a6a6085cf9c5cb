"""train_step reads the loss on the host every step with the dispatch modes off, inside a
profiler range it names ``aten::log_step``: the profiler's second look skips what runs
inside another op's kernel, hoping a range named like an op passes for one (attack 42)."""

from tests.submissions_gpu_training import SOLUTIONS

STEP = """
from torch.utils._python_dispatch import _disable_current_modes
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
    with {hide}:
        try:
            _history.append(_item(loss))  # a read on the host, every step
        except Exception:
            pass  # meta has no value
    return loss.detach()
"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-under-a-range-named-like-an-op"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": STEP.format(
        hide='torch.autograd.profiler.record_function("aten::log_step"), _disable_current_modes()'
    ),
}
# The same read, the record on: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": "import contextlib\n" + STEP.format(hide="contextlib.nullcontext()"),
}
