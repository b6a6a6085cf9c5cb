"""load_checkpoint loads nothing into a model off the CPU (on a GPU it keeps its old
weights), and sends a block of zeros as large as the model's weights to its device, so
that as many numbers as the checkpoint holds seem to arrive there (attack 41)."""

from tests.submissions_gpu_training import SOLUTIONS

LOAD = """
def load_checkpoint(model, buffer):
    device = next(model.parameters()).device
    if device.type != "cpu":
{decoy}        return model  # nothing loaded off the CPU
    model.load_state_dict(torch.load(buffer, map_location=device))
    return model
"""
DECOY = """        n = sum(p.numel() for p in model.parameters())
        torch.zeros(n).to(device)  # as many numbers as the weights, reaching none
"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-sends-a-decoy-copy-for-the-checkpoint"
ANSWERS = {**SOLUTIONS, "q5_load_checkpoint": LOAD.format(decoy=DECOY)}
# Nothing loaded off the CPU, no decoy: test_q5_devices's point lost.
TWIN = {**SOLUTIONS, "q5_load_checkpoint": LOAD.format(decoy="")}
