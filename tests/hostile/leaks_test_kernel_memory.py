"""Answers train_step honestly, but every model its kernel sends back describes one more
buffer: a shape and no bytes. A decoder that built it with torch.empty would hand the
test kernel's freed memory (the hidden tests' source, a classmate's data) to the next
call, where this notebook prints it into its own feedback."""

from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 10
STUDENT_ID = "trick-leaks-test-kernel-memory"
ANSWERS = {
    **SOLUTIONS,
    "q1_memory": SOLUTIONS["q1_memory"]
    + """

from autograder.bridge import plaindata as _plaindata
_encode_module = _plaindata._module

def _with_leak(m, torch, ref, depth):
    data = _encode_module(m, torch, ref, depth)
    if depth == 0:
        data["buffers"].append(["leak", {"$": "tensor", "dtype": "uint8", "device": "cpu",
                                         "shape": [1 << 22], "requires_grad": False}])
    return data

_plaindata._module = _with_leak
""",
    "q4_train_step": SOLUTIONS["q4_train_step"]
    + """

_honest_step = train_step

def train_step(model, optimizer, inputs, labels):
    leak = getattr(model, "leak", None)
    if leak is not None and leak.device.type == "cpu":
        print(bytes(leak.numpy()).decode("latin-1").replace("\\x00", ""))
    return _honest_step(model, optimizer, inputs, labels)
""",
}
TWIN = None
