"""The fourth lesson, gpu_profiling: what it teaches, executed top to bottom on the CPU, and as
committed. What every lesson has is tested for every unit in test_lessons.py."""

import re

import torch
from lessons import cell_with, fixtures, flat, markdown, printed
from torch.profiler import ProfilerActivity, profile, schedule

from gpucourse.trace_timeline import (
    Event,
    events_from_profiler,
    lane_summary,
    quiet_native_logs,
    steps,
)

UNIT = "gpu_profiling"
committed, executed = fixtures(UNIT)


def test_the_cpu_is_profiled_and_cuda_only_where_there_is_a_gpu(executed, committed):
    assert printed(cell_with(executed, "activities = [ProfilerActivity.CPU]")) == "profiling: CPU\n"
    assert (
        '[ProfilerActivity.CUDA] if device == "cuda" else []'
        in cell_with(committed, "activities = [ProfilerActivity.CPU]").source
    )
    text = flat(markdown(committed))
    assert "the GPU's lanes are **described, not shown**" in text
    assert "Nothing here is a GPU trace made up to look real." in text


def test_the_first_steps_are_timed_and_labelled_measured(executed):
    line = printed(cell_with(executed, "def timed_steps(n=6):")).strip()
    assert re.fullmatch(r"ms a step \(measured\): [\d.]+(, [\d.]+){5}", line), line


def test_the_schedule_records_the_steps_it_says(executed, committed):
    cell = cell_with(committed, "schedule=schedule(wait=2, warmup=1, active=2, repeat=1)")
    assert "for _ in range(6):" in cell.source
    assert printed(
        cell_with(executed, "schedule=schedule(wait=2, warmup=1, active=2, repeat=1)")
    ) == ("steps recorded: [3, 4]\n")
    assert "Steps 3 and 4: steps 0 and 1 wait, step 2 warms up" in flat(markdown(committed))


def test_the_tables_are_printed_by_self_time_by_shape_and_with_memory(executed):
    table = printed(cell_with(executed, 'prof.key_averages().table(sort_by="self_cpu_time_total"'))
    assert "Self CPU %" in table and "CPU total" in table and "Self CPU time total:" in table
    rows = [line for line in table.splitlines() if re.search(r"\d%\s", line)]
    shares = [float(re.findall(r"([\d.]+)%", row)[0]) for row in rows]
    assert len(rows) == 8 and shares == sorted(shares, reverse=True)
    # The two Linear layers' aten::addmm calls, a row each with their own input shapes.
    by_shape = printed(cell_with(executed, "group_by_input_shape=True")).splitlines()
    shapes = {line.split("inputs ")[1].split("  ")[0] for line in by_shape if "aten::addmm" in line}
    assert len(shapes) == 2 and all("3072" in s or "256" in s for s in shapes), by_shape
    memory = printed(cell_with(executed, "profile_memory=True"))
    assert "CPU Mem" in memory and "Self CPU Mem" in memory
    # 64 × 256 + 64 × 10 float32 numbers: 66.5 KB, as the folded answer counts.
    (addmm,) = [line for line in memory.splitlines() if line.strip().startswith("aten::addmm")]
    assert "66.50 KB" in addmm


def test_the_memory_answer_counts_what_the_table_shows(committed):
    text = flat(markdown(committed))
    assert 64 * 256 * 4 == 65_536 and 64 * 10 * 4 == 2_560 and (65_536 + 2_560) / 1024 == 66.5
    assert (
        "64 × 256 × 4 bytes = 65,536 bytes, 64 KB, and 64 × 10 × 4 = 2,560 bytes, 2.5 KB: 66.5 KB"
        in text
    )


def test_the_trace_is_read_into_lanes_named_in_words(executed, committed):
    lines = printed(cell_with(executed, "for lane in lanes(events):")).strip().split("\n")
    assert re.fullmatch(r".*gpu_profiling_trace\.json: \d+ kB", lines[0])
    assert re.fullmatch(r"CPU thread 1: \d+ events \(cpu_op, user_annotation\)", lines[1])
    summary = printed(cell_with(executed, "step = steps(events)[0]")).strip().split("\n")
    assert re.fullmatch(r"step 3: [\d.]+ ms \(measured\)", summary[0])
    assert re.fullmatch(
        r"CPU thread 1: busy [\d.e+]+ ms of [\d.e+]+ ms \(\d+%\); longest gap .*", summary[1]
    )
    text = flat(markdown(committed))
    assert "[ui.perfetto.dev](https://ui.perfetto.dev)" in text
    assert "`from google.colab import files; files.download(trace_path)`" in text
    assert "`Memcpy HtoD (Pageable -> Device)`" in text and "`cudaStreamSynchronize`" in text


def _report(cell_text) -> tuple[list[str], list[str]]:
    lines = cell_text.strip().split("\n")
    ranges = [
        line.split()[0] if not line.strip().startswith("read loss") else "read loss"
        for line in lines
        if line.startswith("  ") and " ms a step, " in line
    ]
    return lines, ranges


def test_the_slow_loop_is_profiled_and_loading_is_found_the_bottleneck(executed):
    lines, ranges = _report(printed(cell_with(executed, "slow_events = profile_loop(")))
    assert re.fullmatch(r"[\d.e+]+ ms a step over 3 steps \(measured\)", lines[0])
    assert sorted(ranges) == sorted(
        ["load", "normalize", "copy", "forward", "backward", "optimizer", "read loss"]
    )
    assert ranges[0] == "load", lines  # the largest range, as the folded answer says
    assert any(line.strip().startswith("CPU thread 1: busy") for line in lines)


def test_each_fix_is_profiled_again(executed, committed):
    workers = printed(cell_with(executed, "worker_loader = DataLoader("))
    assert re.match(r"\d loader workers? for \d+ CPU cores\n", workers)
    assert re.search(r"load: [\d.e+]+ ms a step -> [\d.e+]+ ms \(measured\)\n$", workers)
    for snippet in ("normalized = report(", "fast = report("):
        lines, ranges = _report(printed(cell_with(executed, snippet)))
        assert "ms a step over 3 steps (measured)" in lines[0] and len(ranges) == 7
    fast = cell_with(committed, "def fast_step(images, labels):").source
    assert "non_blocking=True" in fast and 'pin_memory=(device == "cuda")' in fast
    assert "loss.detach()" in fast and "loss.item()" not in fast
    slow = cell_with(committed, "def slow_step(images, labels):").source
    assert "losses.append(loss.item())" in slow and "images.float() / 255" in slow


def test_the_timeline_walks_the_slow_loops_own_trace(executed):
    probe = printed(cell_with(executed, "timeline.gap.click()")).strip().split("\n")
    assert re.fullmatch(
        r"Event 2 of \d+: load: a range marked with record_function, on CPU "
        r"thread 1, from [\d.]+ ms for [\d.]+ ms\.",
        probe[0],
    ), probe[0]
    assert probe[1].startswith("Longest gap on CPU thread 1: ")
    assert probe[2].startswith("CPU thread 1: busy ")


def _check_yourself(committed) -> str:
    return markdown(committed).split("## Check yourself", 1)[1].split("## Go further", 1)[0]


def test_check_yourself_1_the_answer_is_read_from_the_pasted_table(committed):
    section = _check_yourself(committed)
    assert "recorded on a CPU, with PyTorch 2.13.0+cpu" in flat(section)
    table = section.split("```", 2)[1]
    rows = {}
    for line in table.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 7 and cells[0].startswith(("aten::", "Optimizer")):
            value, unit = re.fullmatch(r"([\d.]+)(ms|us)", cells[2]).groups()
            rows[cells[0]] = float(value) * (1000 if unit == "ms" else 1)
    total_ms = float(re.search(r"Self CPU time total: ([\d.]+)ms", table)[1])
    top = max(rows, key=rows.get)
    share = rows[top] / (total_ms * 1000)
    assert top == "aten::mm" and f"{share:.1%}" == "40.3%"
    assert "`aten::mm`: 4.668 ms of 11.579 ms, 4.668 / 11.579 ≈ 40.3%" in flat(section)


def test_check_yourself_2_overlaps_counted_once_is_45_percent(committed):
    spans = [(0, 4), (3, 7), (10, 12)]
    (summary,) = lane_summary(
        [Event("GPU 0 stream 7", "k", a * 1e3, (b - a) * 1e3, "kernel") for a, b in spans], 0, 20e3
    )
    assert round(summary.share * 100) == 45
    assert "45%." in _check_yourself(committed)
    # On two streams: kernels on one stream run in order, and could not overlap.
    text = flat(_check_yourself(committed))
    assert "with two streams" in text
    assert "from 0 to 4 ms (one stream), from 3 to 7 ms (the other) and from 10 to 12 ms" in text


def test_check_yourself_3_is_what_this_torch_records(committed):
    """wait=1, warmup=1, active=3, repeat=1 over 8 calls of prof.step(): steps 2, 3 and 4."""
    with (
        quiet_native_logs(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        ) as prof,
    ):
        for _ in range(8):
            torch.ones(4).sum()
            prof.step()
    assert [s.number for s in steps(events_from_profiler(prof))] == [2, 3, 4]
    section = flat(_check_yourself(committed))
    assert "`torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1)`" in section
    assert "Steps 2, 3 and 4: step 0 waits, step 1 warms up, steps 2 to 4 are recorded" in section
