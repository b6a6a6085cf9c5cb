"""The profiling lesson executed on a CUDA GPU (skipped where torch.cuda.is_available() is
False): the lanes it says a GPU adds are there, recorded live, not described."""

import re

import pytest
from lessons import cell_with, fixtures, printed

pytestmark = pytest.mark.gpu


_, executed = fixtures("gpu_profiling", on_gpu=True)


def test_cuda_activity_is_profiled(executed):
    assert printed(cell_with(executed, "activities = [ProfilerActivity.CPU]")) == (
        "profiling: CPU, CUDA\n"
    )


def test_the_trace_has_a_gpu_stream_lane_of_kernels(executed):
    lines = printed(cell_with(executed, "for lane in lanes(events):")).strip().split("\n")[1:]
    gpu = [line for line in lines if line.startswith("GPU ")]
    assert gpu and any(re.match(r"GPU \d+ stream \d+: \d+ events \(.*kernel.*\)", g) for g in gpu)
    assert any("cuda_runtime" in line for line in lines if line.startswith("CPU thread"))


def test_each_report_gives_the_gpu_streams_busy_share(executed):
    summary = printed(cell_with(executed, "step = steps(events)[0]"))
    assert re.search(r"^GPU \d+ stream \d+: busy ", summary, flags=re.M)
    for snippet in ("slow_events = profile_loop(", "fast = report("):
        assert re.search(
            r"^  GPU \d+ stream \d+: busy ", printed(cell_with(executed, snippet)), flags=re.M
        )
