"""The training lesson executed on a CUDA GPU (skipped where torch.cuda.is_available() is
False): what it shows there instead of what it says a GPU would show."""

import pytest
from lessons import cell_with, fixtures, printed

pytestmark = pytest.mark.gpu


_, executed = fixtures("gpu_training", on_gpu=True)


def test_the_model_moves_to_the_gpu_and_the_device_error_names_it(executed):
    assert printed(cell_with(executed, "moved = model.to(far)")) == "cuda:0 True\ncpu\n"
    message = printed(cell_with(executed, "far_model(cpu_batch)\nexcept RuntimeError"))
    # The lesson quotes only the message's start: the rest's wording varies between releases.
    assert message.startswith("RuntimeError: Expected all tensors to be on the same device")
    assert "cuda:0" in message and "cpu" in message


def test_host_reads_are_found_by_the_sync_debug_mode(executed):
    lines = printed(cell_with(executed, "find_host_reads(device)")).strip().split("\n")
    assert all("sync debug mode" in line for line in lines)
    assert lines[-1].startswith("total += loss.detach(): stays on the device")


def test_the_cost_of_reads_is_measured_on_the_gpu(executed):
    out = printed(cell_with(executed, "cost = measure_reads(device)"))
    assert "(measured on cuda, batch 64)" in out and "On this GPU, reading every step was" in out


def test_memory_is_read_from_the_allocator(executed):
    out = printed(cell_with(executed, "step_memory(device)"))
    assert "the weights: " in out and "(measured)" in out and "counted from the tensors" in out
    assert "(measured)" in printed(cell_with(executed, "print(peak_memory(device))"))


def test_a_gpu_checkpoint_loads_without_map_location_here(executed):
    assert (
        printed(cell_with(executed, "checkpoint = saved_on_gpu(model)")) == "loaded onto cuda:0\n"
    )
    assert (
        printed(cell_with(executed, "torch.load(checkpoint, map_location=device)"))
        == "cuda:0 True\n"
    )
