"""load_checkpoint returns, instead of the model, a Sequential of 5,000 one-channel
convolutions: under the bridge message limit (500,000 values), but rebuilding 27,000 such layers kept a
test kernel busy for minutes."""

from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 13
STUDENT_ID = "trick-many-layers"
ANSWERS = {
    **SOLUTIONS,
    "q5_load_checkpoint": SOLUTIONS["q5_load_checkpoint"]
    + """

_honest_load = load_checkpoint
_layers = torch.nn.Sequential(*[torch.nn.Conv2d(1, 1, 1, device="meta") for _ in range(5_000)])

def load_checkpoint(model, buffer):
    _honest_load(model, buffer)
    return _layers
""",
}
TWIN = None
COSTLY = True  # the report names the refused answer
