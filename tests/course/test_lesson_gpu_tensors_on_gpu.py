"""The lesson executed on a CUDA GPU (skipped where torch.cuda.is_available() is False)."""

import re

import pytest
from lessons import fixtures

from gpucourse import measure

pytestmark = pytest.mark.gpu

# Without nvidia-smi, the fastest common host link: PCIe 5.0 x16.
FALLBACK_RATED_GB_S = measure.PCIE_LANE_GB_S[5] * 16


_, executed = fixtures("gpu_tensors", on_gpu=True)


def printed(nb, snippet):
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and snippet in c.source]
    return "".join(o.text for o in cell.outputs if o.output_type == "stream")


def figure(text, label, unit):
    match = re.search(rf"{re.escape(label)}: ([\d.]+) {unit}", text)
    assert match, f"no line {label!r} in:\n{text}"
    return float(match.group(1))


def test_tensor_py_third_line_reads_cuda0(executed):
    assert printed(executed, "z = x * 10") == "cuda:0\n[[ 0.  0.  0.]\n [20. 40.  0.]]\n"


def test_same_device_error_uses_the_gpu(executed):
    message = printed(executed, "x_far + y_cpu\nexcept RuntimeError")
    assert "cuda" in message and "cpu" in message
    assert printed(executed, "total = x_far + y_cpu.to(far)") == "cuda:0\n"


def test_host_to_device_bandwidth_is_positive_and_below_the_links_rated_peak(executed):
    out = printed(executed, "times = measure_step(device)")
    rated = (measure.rated_link_gb_s() or (FALLBACK_RATED_GB_S, "assumed"))[0]
    for kind in ("pinned", "pageable"):
        gb_s = float(
            re.search(rf"copy to GPU, {kind} memory: [\d.]+ ms \(([\d.]+) GB/s", out).group(1)
        )
        assert 0 < gb_s < rated, f"{kind}: {gb_s} GB/s against a rated {rated:.1f} GB/s"
    assert figure(out, "GPU step", "ms") > 0
    assert figure(out, "copy back to CPU", "ms") > 0


def test_the_verdict_is_measured_from_pageable_copies_and_says_pinning_is_not_counted(executed):
    out = printed(executed, "times = measure_step(device)")
    verdict = printed(executed, "print(times.verdict())")
    pageable = figure(out, "copy to GPU, pageable memory", "ms")
    assert f"GPU route, measured: {pageable:.3f} ms copy there" in verdict
    assert re.search(
        r"Verdict, measured here: for one step the (CPU is faster|GPU route is "
        r"faster|two are about even)",
        verdict,
    )
    assert "that leaves out pinning itself" in verdict
    assert "assumed" not in verdict


def test_a_model_and_a_tensor_made_on_the_gpu(executed):
    assert printed(executed, "moved = model.to(device)") == "cuda:0 cuda:0 True\nTrue\n"


def test_cuda_events_time_the_same_job_as_the_synchronised_clock(executed):
    events = figure(printed(executed, "print(event_timing(device))"), "time with CUDA events", "ms")
    synced = figure(
        printed(executed, "timing = background_timing(device)"), "time with synchronize()", "ms"
    )
    # The same ten products: the GPU's clock leaves out only the host's launch overhead.
    assert 0 < events < 2 * synced


def test_unsynchronised_timing_reads_less_than_synchronised(executed):
    out = printed(executed, "timing = background_timing(device)")
    unsynced = figure(out, "time without synchronize()", "ms")
    synced = figure(out, "time with synchronize()", "ms")
    assert unsynced < synced
    assert figure(out, "time with torch.utils.benchmark", "ms") > unsynced
