"""The data loading lesson executed on a CUDA GPU (skipped where torch.cuda.is_available() is
False): what it shows there instead of what it says a GPU would show."""

import re

import pytest
from lessons import cell_with, fixtures, printed

pytestmark = pytest.mark.gpu


_, executed = fixtures("gpu_data_loading", on_gpu=True)


def test_pin_memory_returns_a_pinned_copy(executed):
    assert printed(cell_with(executed, "pinned = images.pin_memory()")) == (
        "the loader's batch is pinned: False\npinned copy: True | the original: False\n"
    )


def test_the_three_copies_are_measured(executed):
    lines = printed(cell_with(executed, "copy_lines(device, images)")).strip().split("\n")
    assert len(lines) == 3 and all(line.endswith("GB/s (measured)") for line in lines)


def test_the_prefetcher_yields_batches_on_the_gpu(executed):
    assert printed(cell_with(executed, "prefetched = Prefetcher(")) == "".join(
        f"{step} (64, 3, 224, 224) torch.uint8 cuda:0\n" for step in range(3)
    )
    # The same values within float32's rounding: a GPU need not round as the CPU does.
    same = printed(cell_with(executed, "def to_device_uint8(images, device):"))
    gap = re.fullmatch(
        r"torch\.float32 cuda:0 True \| largest difference: (\S+) \(measured\)\n", same
    )
    assert gap and float(gap[1]) < 1e-5, same


def test_every_stage_is_measured_and_the_verdict_says_so(executed):
    lines = printed(cell_with(executed, "speeds = measure_speeds(device)")).strip().split("\n")
    assert all("(measured here: " in line for line in lines[:4]), lines
    assert lines[4].endswith("(measured on this machine)")
