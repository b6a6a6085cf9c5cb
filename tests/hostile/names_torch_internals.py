"""Sends every tensor with a dtype named after one of torch's lazily imported internals
(_dynamo, onnx) or a deprecated name whose shim prints a warning (has_cuda), hoping the
test kernel looks the name up on torch: importing torch._dynamo there takes seconds per
test cell, and a shim's warning lands in a test's output."""

from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 13
STUDENT_ID = "trick-names-torch-internals"
ANSWERS = {
    **SOLUTIONS,
    "q1_memory": SOLUTIONS["q1_memory"]
    + """

from autograder.bridge import plaindata as _plaindata
_encode_tensor = _plaindata._tensor
_names = iter(["_dynamo", "has_cuda", "onnx", "_inductor"] * 100_000)

def _renamed(t, torch):
    data = _encode_tensor(t, torch)
    data["dtype"] = next(_names)
    return data

_plaindata._tensor = _renamed
""",
}
TWIN = None
