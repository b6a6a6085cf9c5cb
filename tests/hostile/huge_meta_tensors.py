"""train_step returns its loss as a 560-million-element tensor on meta (free to make),
and describes the model's weights as such tensors with no bytes, hoping the test kernel
builds them for real (4.5 GB as float64) and is killed for memory, leaving the
instructor a "needs review"."""
from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 10
STUDENT_ID = "trick-huge-meta-tensors"
ANSWERS = {**SOLUTIONS, "q4_train_step": SOLUTIONS["q4_train_step"] + '''

_honest_step = train_step

def train_step(model, optimizer, inputs, labels):
    _honest_step(model, optimizer, inputs, labels)
    return torch.empty(560_000_000, device="meta")
'''}
TWIN = None
COSTLY = True  # the report names the refused answer
