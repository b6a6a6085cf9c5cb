"""The trace model: Chrome trace events into lanes, steps, busy time (a union, clipped to the
window), longest gaps, and a real CPU trace recorded here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from gpucourse.trace_timeline import (
    Event,
    describe,
    events_from_chrome_trace,
    events_from_profiler,
    lane_summary,
    lanes,
    quiet_native_logs,
    range_totals,
    steps,
    trim_trace,
    union,
)

GPU = "GPU 0 stream 7"


def kernels(*spans_ms, lane=GPU):
    return [
        Event(lane, f"kernel {i}", a * 1e3, (b - a) * 1e3, "kernel")
        for i, (a, b) in enumerate(spans_ms)
    ]


def test_overlapping_events_count_once():
    """Check yourself 2: (0, 4), (3, 7), (10, 12) ms in 0-20 ms: 9 ms, 45%, not 10 ms."""
    (summary,) = lane_summary(kernels((0, 4), (3, 7), (10, 12)), 0, 20e3)
    assert summary.busy_us == pytest.approx(9e3)
    assert summary.share == pytest.approx(0.45)
    assert (summary.gap_us, summary.gap_start_us, summary.gap_end_us) == (8e3, 12e3, 20e3)


def test_nested_cpu_operators_count_once():
    events = [
        Event("CPU thread 1", "aten::linear", 0, 10, "cpu_op"),
        Event("CPU thread 1", "aten::addmm", 2, 6, "cpu_op"),
        Event("CPU thread 1", "aten::t", 1, 1, "cpu_op"),
    ]
    (summary,) = lane_summary(events, 0, 20)
    assert summary.busy_us == 10 and summary.share == 0.5


def test_events_are_clipped_to_the_window():
    events = kernels((0, 4), (6, 12))
    (summary,) = lane_summary(events, 2e3, 8e3)
    assert summary.busy_us == pytest.approx(4e3)  # 2-4 and 6-8
    assert summary.window_us == 6e3
    assert (summary.gap_start_us, summary.gap_end_us) == (4e3, 6e3)
    assert union([(0, 4), (6, 12)], 2, 8) == [(2, 4), (6, 8)]
    assert union([(0, 1), (9, 12)], 2, 8) == []


def test_the_longest_gap_can_be_at_either_edge_and_ties_go_to_the_earliest():
    (before,) = lane_summary(kernels((15, 20)), 0, 20e3)
    assert (before.gap_start_us, before.gap_end_us) == (0, 15e3)
    (tie,) = lane_summary(kernels((5, 10)), 0, 15e3)
    assert (tie.gap_start_us, tie.gap_end_us) == (0, 5e3)
    (idle,) = lane_summary(kernels((30, 31)), 0, 20e3)
    assert idle.busy_us == 0 and idle.share == 0 and idle.gap_us == 20e3


def test_ranges_are_not_work_and_each_lane_is_summarised_apart():
    events = kernels((0, 2)) + [
        Event("CPU thread 1", "forward", 0, 20e3, "user_annotation"),
        Event("CPU thread 1", "aten::mm", 1e3, 3e3, "cpu_op"),
        Event("GPU 0 stream 7", "ProfilerStep#1", 0, 20e3, "gpu_user_annotation"),
    ]
    summaries = {s.lane: s for s in lane_summary(events, 0, 20e3)}
    assert list(summaries) == ["CPU thread 1", GPU]
    assert summaries["CPU thread 1"].busy_us == 3e3
    assert summaries[GPU].busy_us == 2e3
    assert "busy 2 ms of 20 ms (10%); longest gap 18 ms, from 2 ms" in summaries[GPU].line()
    with pytest.raises(ValueError, match="ends"):
        lane_summary(events, 5, 1)


def _trace(*events, metadata=()):
    return {"schemaVersion": 1, "traceEvents": [*metadata, *events]}


def test_lanes_are_named_in_words_from_pid_tid_and_category():
    """kineto: CPU work has the process and thread; GPU work has the device and stream."""
    trace = _trace(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 11,
            "tid": 11,
            "ts": 1000.5,
            "dur": 4,
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 11,
            "tid": 11,
            "ts": 1002,
            "dur": 1,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "autograd",
            "pid": 11,
            "tid": 42,
            "ts": 1010,
            "dur": 2,
        },
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1005, "dur": 3},
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 1009,
            "dur": 1,
        },
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 900,
            "dur": 500,
        },
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 2000},
        {"ph": "s", "id": 1, "pid": 11, "tid": 11, "ts": 1002, "cat": "ac2g", "name": "ac2g"},
        metadata=[{"name": "thread_name", "ph": "M", "pid": 11, "tid": 11, "args": {"name": "x"}}],
    )
    events = events_from_chrome_trace(trace)
    assert lanes(events) == ["CPU thread 1", "CPU thread 2", "GPU 0 stream 7"]
    assert [(e.lane, e.name, e.start_us, e.dur_us) for e in events] == [
        ("CPU thread 1", "aten::mm", 0.0, 4.0),
        ("CPU thread 1", "cudaLaunchKernel", 1.5, 1.0),
        ("GPU 0 stream 7", "gemm", 4.5, 3.0),
        ("GPU 0 stream 7", "Memcpy HtoD (Pageable -> Device)", 8.5, 1.0),
        ("CPU thread 2", "autograd", 9.5, 2.0),
    ]
    # The same from a JSON string, a path, or a bare list of events.
    assert events_from_chrome_trace(json.dumps(trace)) == events
    assert events_from_chrome_trace(trace["traceEvents"]) == events
    assert events_from_chrome_trace({"traceEvents": []}) == []


def test_from_a_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(
        json.dumps(
            _trace({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 2})
        )
    )
    assert events_from_chrome_trace(path) == [Event(GPU, "k", 0.0, 2.0, "kernel")]
    assert events_from_chrome_trace(str(path)) == events_from_chrome_trace(path)


def test_steps_come_from_the_profiler_step_ranges_in_order():
    events = [
        Event("CPU thread 1", "ProfilerStep#4", 50, 10, "user_annotation"),
        Event("CPU thread 1", "ProfilerStep#3", 20, 25, "user_annotation"),
        Event("GPU 0 stream 7", "ProfilerStep#3", 21, 40, "gpu_user_annotation"),
        Event("CPU thread 1", "ProfilerStep#x", 0, 1, "user_annotation"),
    ]
    found = steps(events)
    assert [(s.number, s.start_us, s.end_us, s.dur_us) for s in found] == [
        (3, 20, 45, 25),
        (4, 50, 60, 10),
    ]


def test_range_totals_count_each_name_once_and_skip_the_step():
    events = [
        Event("CPU thread 1", "ProfilerStep#1", 0, 100, "user_annotation"),
        Event("CPU thread 1", "load", 0, 30, "user_annotation"),
        Event("CPU thread 1", "load", 20, 20, "user_annotation"),  # overlaps the first
        Event("CPU thread 1", "forward", 60, 50, "user_annotation"),  # runs past the window
        Event("CPU thread 1", "aten::mm", 60, 5, "cpu_op"),
    ]
    assert range_totals(events, 0, 100) == {"forward": 40, "load": 40}
    assert range_totals(events, 0, 100, names=("load", "copy")) == {"load": 40, "copy": 0}


def test_describe_names_the_kind_lane_and_times_in_words():
    assert describe(Event("GPU 0 stream 7", "gemm", 1500, 250, "kernel")) == (
        "gemm: a kernel, running on the GPU, on GPU 0 stream 7, from 1.500 ms for 0.250 ms"
    )
    assert describe(Event("CPU thread 1", "ProfilerStep#3", 0, 1000, "user_annotation")).startswith(
        "ProfilerStep#3: the profiler's step 3, on CPU thread 1"
    )
    assert "a CUDA runtime call made by the CPU" in describe(
        Event("CPU thread 1", "cudaStreamSynchronize", 0, 1, "cuda_runtime")
    )
    assert "an event of kind mystery" in describe(Event("CPU thread 1", "x", 0, 1, "mystery"))


def _record(step_calls=8):
    model = torch.nn.Linear(8, 4)
    with (
        quiet_native_logs(),
        profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        ) as prof,
    ):
        for _ in range(step_calls):
            with record_function("forward"):
                loss = model(torch.ones(2, 8)).sum()
            with record_function("backward"):
                loss.backward()
            prof.step()
    return events_from_profiler(prof)


def test_a_real_cpu_trace_recorded_here():
    """PyTorch's own trace: cpu_op and user_annotation events on the main thread, the
    schedule's recorded steps (Check yourself 3: wait=1, warmup=1, active=3 over 8 calls
    records steps 2, 3 and 4), and lane summaries inside each step."""
    events = _record()
    assert [s.number for s in steps(events)] == [2, 3, 4]
    assert {e.cat for e in events} <= {"cpu_op", "user_annotation"}
    assert "CPU thread 1" in lanes(events)
    names = {e.name for e in events}
    assert {"forward", "backward", "aten::addmm"} <= names
    step = steps(events)[0]
    (cpu,) = [
        s for s in lane_summary(events, step.start_us, step.end_us) if s.lane == "CPU thread 1"
    ]
    assert 0 < cpu.busy_us <= step.dur_us and 0 < cpu.share <= 1
    totals = range_totals(events, step.start_us, step.end_us, names=("forward", "backward"))
    assert 0 < totals["forward"] < step.dur_us and 0 < totals["backward"] < step.dur_us


def test_quiet_native_logs_hides_fd_2_only_inside_and_restores_it(tmp_path):
    target = tmp_path / "stderr.txt"
    saved = os.dup(2)
    try:
        with open(target, "w") as sink:
            os.dup2(sink.fileno(), 2)
            os.write(2, b"before\n")
            with quiet_native_logs():
                os.write(2, b"hidden\n")
            os.write(2, b"after\n")
            sys.stderr.flush()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert target.read_text() == "before\nafter\n"


def test_quiet_native_logs_hides_only_the_profilers_cycle_warning():
    """Some releases (2.11 on a GPU) warn that the profiler clears events between cycles: noise
    in a lesson that records one cycle. Every other Python warning still shows."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_native_logs():
            warnings.warn(
                "Warning: Profiler clears events at the end of each cycle.Only events from the "
                "current cycle will be reported.",
                UserWarning,
                stacklevel=1,
            )
            warnings.warn("a warning the learner must see", UserWarning, stacklevel=1)
        warnings.warn(
            "Warning: Profiler clears events at the end of each cycle.", UserWarning, stacklevel=1
        )
    assert [str(w.message) for w in seen] == [
        "a warning the learner must see",
        "Warning: Profiler clears events at the end of each cycle.",
    ]


def test_trim_trace_keeps_the_first_steps_their_lanes_names_and_where_it_was_recorded():
    x = {"ph": "X", "pid": 1, "tid": 1}
    trace = _trace(
        {**x, "cat": "user_annotation", "name": "ProfilerStep#3", "ts": 100, "dur": 100},
        {**x, "cat": "user_annotation", "name": "ProfilerStep#4", "ts": 200, "dur": 100},
        {**x, "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 0, "dur": 100},
        {**x, "cat": "cpu_op", "name": "aten::mm", "ts": 50, "dur": 10, "args": {"External id": 3}},
        {**x, "cat": "cpu_op", "name": "aten::add", "ts": 250, "dur": 10},  # in step 4: dropped
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 190, "dur": 20},
        {
            "ph": "X",
            "cat": "Trace",
            "name": "span",
            "pid": "Spans",
            "tid": "x",
            "ts": 0,
            "dur": 300,
        },
        metadata=[
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
            {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
            {"ph": "M", "name": "thread_name", "pid": 9, "tid": 9, "args": {"name": "idle"}},
        ],
    )
    trimmed = trim_trace(trace, keep_steps=2, recorded_on={"device": "NVIDIA X", "torch": "2.x"})
    assert trimmed["recordedOn"] == {"device": "NVIDIA X", "torch": "2.x"}
    kept = [(e["ph"], e["name"]) for e in trimmed["traceEvents"]]
    assert kept == [
        ("M", "process_name"),
        ("M", "thread_name"),
        ("X", "ProfilerStep#3"),
        ("X", "ProfilerStep#2"),
        ("X", "aten::mm"),
        ("X", "gemm"),
    ]
    assert all("args" not in e for e in trimmed["traceEvents"] if e["ph"] == "X")
    assert [s.number for s in steps(events_from_chrome_trace(trimmed))] == [2, 3]
    with pytest.raises(ValueError, match="no ProfilerStep"):
        trim_trace(_trace({**x, "cat": "cpu_op", "name": "a", "ts": 0, "dur": 1}))


def test_the_record_script_refuses_without_a_gpu_and_records_on_the_cpu_when_asked(tmp_path):
    script = Path(__file__).resolve().parents[2] / "scripts" / "record-gpu-trace"
    out = tmp_path / "trace.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    refused = subprocess.run(
        [sys.executable, str(script), "--out", str(out)], capture_output=True, text=True, env=env
    )
    assert refused.returncode == 1 and "no CUDA GPU here" in refused.stderr and not out.exists()
    done = subprocess.run(
        [sys.executable, str(script), "--cpu", "--steps", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    trace = json.loads(out.read_text())
    assert (
        trace["recordedOn"]["device"] == "cpu" and trace["recordedOn"]["torch"] == torch.__version__
    )
    events = events_from_chrome_trace(trace)
    assert [s.number for s in steps(events)] == [2]
    assert {"load", "normalize", "copy", "forward", "backward", "optimizer", "read loss"} <= {
        e.name for e in events
    }


def test_the_model_and_the_widget_import_without_torch():
    code = (
        "import sys, gpucourse.trace_timeline, gpucourse.timeline_widget; "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
