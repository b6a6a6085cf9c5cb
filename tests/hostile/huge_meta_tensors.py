"""train_step trains honestly, then returns its loss as a 560-million-element tensor on
meta (free to make), its own encoder's bound removed, hoping the test kernel builds the
tensor for real (4.5 GB as float64) and is killed for memory, leaving the instructor a
"needs review"."""

from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 10
STUDENT_ID = "trick-huge-meta-tensors"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": SOLUTIONS["q4_train_step"]
    + """

from autograder.bridge import plaindata as _plaindata
_encode_tensor = _plaindata._tensor

def _unbounded(t, torch):
    if t.device.type == "meta":
        return {"$": "tensor", "dtype": "float32", "device": "meta", "shape": list(t.shape),
                "requires_grad": False}
    return _encode_tensor(t, torch)

_plaindata._tensor = _unbounded
_honest_step = train_step

def train_step(model, optimizer, inputs, labels):
    _honest_step(model, optimizer, inputs, labels)
    return torch.empty(560_000_000, device="meta")
""",
}
TWIN = None
COSTLY = True  # the report names the refused answer
