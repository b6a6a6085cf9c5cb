"""to_device_uint8 copies the uint8 images to the device where the record sees it, then
normalizes them on the CPU in float32 and copies those (four times the bytes) over its
result inside PyTorch's ``_disable_current_modes``: the record shows only the uint8 copy,
and the result's data seem to come from it (attack 41)."""

from tests.submissions_gpu_data_loading import SOLUTIONS

TO_DEVICE = """
def to_device_uint8(images, device, mean, std):
    from torch.utils._python_dispatch import _disable_current_modes
    result = images.to(device).float()  # uint8 crosses, recorded
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    on_the_cpu = (images.float() / 255 - m) / s  # float32, normalized on the CPU
    with {guard}:
        result.copy_(on_the_cpu.to(device))  # four bytes a number cross
    return result
"""

UNIT = "gpu_data_loading"
WEAKNESS = 14
STUDENT_ID = "trick-copies-float32-with-the-record-switched-off"
ANSWERS = {**SOLUTIONS, "q5_to_device_uint8": TO_DEVICE.format(guard="_disable_current_modes()")}
# The same copies, the record on: test_q5_devices's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q5_to_device_uint8": "import contextlib\n"
    + TO_DEVICE.format(guard="contextlib.nullcontext()"),
}
