"""Measurement helpers: figures with units, and a verdict computed from them."""

import os
import re
import stat

import pytest

from gpucourse import measure
from gpucourse.measure import StepTimes


def test_measure_step_on_cpu_gives_positive_times_and_no_gpu_figures():
    t = measure.measure_step("cpu", points=20_000, min_run_time=0.01)
    assert t.nbytes == 20_000 * 3 * 4
    assert t.cpu_one > 0 and t.cpu_all > 0 and t.threads >= 1
    assert not t.has_gpu and t.to_gpu_pinned is None
    assert t.lines()[0] == "data: 20,000 points x 3 numbers x 4 bytes = 0.24 MB"
    assert t.lines()[1].startswith("CPU step, 1 thread: ") and t.lines()[1].endswith(" ms")
    assert t.lines()[2:] == ["no GPU here: nothing on the GPU side can be measured"]
    assert t.threads_line().startswith(f"CPU step, {t.threads} threads: ")


def test_measure_step_rejects_no_points():
    with pytest.raises(ValueError, match="points must be at least 1"):
        measure.measure_step("cpu", points=0)


def _cpu_only(cpu_one, cpu_all=None):
    return StepTimes(
        points=1_000_000, nbytes=12_000_000, threads=2, cpu_one=cpu_one, cpu_all=cpu_all or cpu_one
    )


def test_cpu_only_verdict_uses_the_seeds_assumed_speeds():
    # 12 MB / 25 GB/s = 0.48 ms each way; 24 MB / 1,500 GB/s = 0.016 ms.
    there, step, back = _cpu_only(1e-3).gpu_route()
    assert there == pytest.approx(0.48e-3) and back == pytest.approx(0.48e-3)
    assert step == pytest.approx(0.016e-3)


@pytest.mark.parametrize(
    "cpu_ms, mix",
    [
        (0.4, "so with a GPU like the text's the CPU would be faster, 2.4 times."),
        (0.95, "so with a GPU like the text's the two would be about even."),
        (1.2, "so with a GPU like the text's the GPU route would be faster, 1.2 times."),
    ],
)
def test_without_a_gpu_the_verdict_is_labelled_and_claims_nothing_unmeasured(cpu_ms, mix):
    text = _cpu_only(cpu_ms * 1e-3).verdict()
    assert f"CPU route, measured here: {cpu_ms:.3f} ms on 1 thread" in text
    assert (
        "GPU route, assumed (no GPU here): 0.480 ms + 0.016 ms + 0.480 ms = 0.976 ms, "
        "from the text's 25 GB/s PCIe 4.0 link and 1,500 GB/s GPU memory"
    ) in text
    assert "Verdict: none measured. This machine has no GPU" in text
    assert "A labelled mix, your measured CPU against the text's assumed GPU" in text
    assert mix in text
    # Before: "for one step the GPU route is faster here, 1.2 times", from nothing measured.
    assert "faster here" not in text and not re.search(r"(CPU|GPU route) is faster", text)


def test_with_a_gpu_the_verdict_is_measured_and_pinning_is_not_free():
    t = StepTimes(
        points=1_000_000,
        nbytes=12_000_000,
        threads=8,
        cpu_one=1e-3,
        cpu_all=0.2e-3,
        to_gpu_pageable=2e-3,
        to_gpu_pinned=0.5e-3,
        gpu_step=0.01e-3,
        to_cpu=0.5e-3,
    )
    text = t.verdict()
    # The copy there is the pageable one, what x.to("cuda") does with an ordinary tensor.
    assert (
        "GPU route, measured: 2.000 ms copy there + 0.010 ms step + 0.500 ms copy back = 2.510 ms"
    ) in text
    assert "Verdict, measured here: for one step the CPU is faster, 2.5 times" in text
    assert (
        "From memory pinned beforehand the GPU route took 1.010 ms; that leaves out pinning" in text
    )
    assert (
        "copy to GPU, pinned memory: 0.500 ms (24.0 GB/s; the data was pinned beforehand, "
        "and pinning it is not counted)"
    ) in t.lines()
    # The CPU side is one thread, as in the text, even where all threads are faster.
    assert "CPU route, measured: 1.000 ms on 1 thread" in text


def test_against_seed_says_plainly_when_this_machine_differs_and_why():
    slower = _cpu_only(1.2e-3).against_seed()
    assert "One core took 1.20 ms here against the text's 0.4 ms: 3.0 times slower" in slower
    assert "Why: adding 1 is almost no arithmetic" in slower
    # 24 MB read and written: 20 GB/s in 1.2 ms here, 60 GB/s in the text's 0.4 ms.
    assert "One core here moved 20 GB/s" in slower and "the text's core moved 60 GB/s" in slower
    close = _cpu_only(0.42e-3).against_seed()
    assert "close to the text's 0.4 ms" in close
    # a figure from a timer that repeats the step on the same tensors: memory or its caches
    assert all("from memory or its caches" in text for text in (slower, close))


def test_the_race_and_the_verdict_use_the_same_cpu_figure():
    t = _cpu_only(0.9e-3, cpu_all=0.3e-3)  # all threads faster: the race still uses one
    race = t.race()
    assert race.cpu_step == pytest.approx(0.9) and race.gpu_assumed
    assert "CPU route, measured here: 0.900 ms on 1 thread" in t.verdict()
    assert "assumed" in race.note and "as in the verdict" in race.note
    assert race.result_line(1).endswith("(the GPU's times assumed, not measured).")
    assert race.crossover_sentence() == "With the assumed GPU, the GPU would win from 2 steps on."


def test_race_on_measured_speeds_crosses_where_the_numbers_say():
    race = _cpu_only(1.2e-3).race()
    assert race.unit == "ms"
    assert race.crossover() == 1  # 0.976 ms < 1.2 ms already at one step
    assert _cpu_only(0.4e-3).race().crossover() == 3  # 0.96 / (0.4 - 0.016) = 2.5


def test_background_timing_on_cpu_reports_three_positive_times():
    t = measure.background_timing("cpu", size=64, repeats=2, min_run_time=0.01)
    assert min(t.unsynced, t.synced, t.benchmark) > 0
    assert t.lines()[1].startswith("time without synchronize(): ")


def _fake_smi(tmp_path, monkeypatch, output):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{output}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_rated_link_reads_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, "4, 16")
    gb_s, name = measure.rated_link_gb_s()
    assert name == "PCIe 4.0 x16" and gb_s == pytest.approx(31.5, abs=0.1)


def test_rated_link_is_none_when_nvidia_smi_says_nonsense(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, "[N/A], [N/A]")
    assert measure.rated_link_gb_s() is None


def test_link_report_without_a_gpu_names_the_assumed_speed():
    assert "assumed 25 GB/s" in measure.link_report(_cpu_only(1e-3))


def test_link_report_compares_copies_with_the_rated_link(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, "4, 16")
    t = StepTimes(
        points=1_000_000,
        nbytes=12_000_000,
        threads=8,
        cpu_one=1e-3,
        cpu_all=0.2e-3,
        to_gpu_pageable=1.2e-3,
        to_gpu_pinned=0.5e-3,
        gpu_step=0.01e-3,
        to_cpu=0.5e-3,
    )
    text = measure.link_report(t)
    assert (
        "24.0 GB/s from pinned memory (pinned beforehand; pinning not counted) and 10.0 GB/s"
        " from pageable" in text
    )
    assert "PCIe 4.0 x16, is rated 31.5 GB/s each way: pinned copies reached 76%" in text


def test_background_timing_explains_itself_for_each_device():
    gpu = measure.BackgroundTiming("cuda", "job", unsynced=0.1e-3, synced=20e-3, benchmark=19e-3)
    assert "200 times too early" in gpu.explain()
    cpu = measure.BackgroundTiming("cpu", "job", unsynced=1e-3, synced=1e-3, benchmark=1e-3)
    assert "No GPU here" in cpu.explain()


def test_event_timing_without_a_gpu_says_what_it_would_do():
    assert measure.event_timing("cpu").startswith("No GPU here: CUDA events exist only on a GPU.")


def _timing(device, unsynced_ms, synced_ms, benchmark_ms):
    return measure.BackgroundTiming(
        device, "10 products", unsynced_ms / 1e3, synced_ms / 1e3, benchmark_ms / 1e3, rounds=5
    )


def test_background_timing_says_the_cpu_times_agree_only_when_they_do():
    """The review's case: 8.66, 18.42 and 12.97 ms must not be called agreeing."""
    close = _timing("cpu", 10.0, 10.5, 11.0)
    assert close.agree() and "the three times agree, to within 1.10 times" in close.explain()
    far = _timing("cpu", 8.66, 18.42, 12.97)
    assert not far.agree()
    assert "agree" not in far.explain()
    assert "the three times differ by up to 2.1 times, even as medians of 5" in far.explain()


def test_background_timing_on_a_gpu_says_too_early_only_from_the_numbers():
    assert "20 times too early" in _timing("cuda", 1.0, 20.0, 19.0).explain()
    short_queue = _timing("cuda", 9.0, 10.0, 10.0).explain()
    assert "too early" not in short_queue and "about as much as the others" in short_queue


def test_background_timing_takes_the_median_of_its_rounds(monkeypatch):
    clock = iter(
        [
            0.0,
            1.0,
            10.0,
            12.0,  # round 1: unsynced 1 s, synced 2 s
            20.0,
            29.0,
            30.0,
            31.0,  # round 2: unsynced 9 s (an outlier), synced 1 s
            40.0,
            42.0,
            50.0,
            53.0,
        ]
    )  # round 3: unsynced 2 s, synced 3 s
    monkeypatch.setattr(measure.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(measure, "seconds", lambda *args, **kwargs: 2.5)
    timing = measure.background_timing("cpu", size=4, repeats=1, rounds=3)
    assert (timing.unsynced, timing.synced, timing.benchmark, timing.rounds) == (2.0, 2.0, 2.5, 3)
    assert timing.lines()[0].endswith("(plain-clock times: the median of 3 runs)")
    with pytest.raises(ValueError, match="rounds must be a whole number"):
        measure.background_timing("cpu", size=4, rounds=0)
