"""Measurements behind the worked example and "GPU work runs in the background".

Everything is timed with ``torch.utils.benchmark.Timer``, which warms up, repeats,
and on a GPU waits for the queue (``torch.cuda.synchronize``) before it reads the
clock. ``min_run_time`` keeps each figure short enough for the lesson's "Run all".

The lines printed to learners have a stable shape, ``<what>: <number> <unit>``, so
tests can read them back (``tests/course/test_lesson_gpu_tensors_on_gpu.py``).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.utils import benchmark

from .race import Race

# The seed's figures for the worked example, which came from one computer.
SEED_POINTS = 1_000_000
SEED_LINK_GB_S = 25.0  # PCIe 4.0 x16 in practice, pinned memory
SEED_GPU_MEMORY_GB_S = 1500.0  # about an A100's memory bandwidth
SEED_ONE_CORE_MS = 0.4

# Three times of the same job "agree" when the largest is at most this many times the smallest.
AGREE_WITHIN = 1.25

# Rated PCIe bandwidth per lane and direction, GB/s, after line encoding.
PCIE_LANE_GB_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def seconds(stmt: str, env: dict, threads: int = 1, min_run_time: float = 0.2) -> float:
    """Median seconds for one run of ``stmt``."""
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def gb_per_s(nbytes: int, secs: float) -> float:
    return nbytes / secs / 1e9


@dataclass(frozen=True)
class StepTimes:
    """One step, ``x + 1`` on ``points`` 3D float32 points, timed each way (seconds).
    The GPU fields stay None on a machine without one.

    What it prints says of every figure whether it was measured here or assumed (the
    text's figures, from another computer), and no verdict mixes the two silently.
    """

    points: int
    nbytes: int
    threads: int
    cpu_one: float
    cpu_all: float
    to_gpu_pageable: float | None = None
    to_gpu_pinned: float | None = None
    gpu_step: float | None = None
    to_cpu: float | None = None

    @property
    def has_gpu(self) -> bool:
        return self.gpu_step is not None

    def gpu_route(self, pinned: bool = False) -> tuple[float, float, float]:
        """(copy there, step, copy back) in seconds. On a GPU, measured, with the copy
        there from pageable memory (what ``x.to("cuda")`` does with an ordinary tensor)
        or, with ``pinned``, from memory that was already pinned. On a CPU-only machine,
        assumed: the text's link and GPU-memory speeds."""
        if self.has_gpu:
            there = self.to_gpu_pinned if pinned else self.to_gpu_pageable
            return there, self.gpu_step, self.to_cpu
        copy = self.nbytes / (SEED_LINK_GB_S * 1e9)
        return copy, 2 * self.nbytes / (SEED_GPU_MEMORY_GB_S * 1e9), copy

    def lines(self) -> list[str]:
        out = [
            f"data: {self.points:,} points x 3 numbers x 4 bytes = {self.nbytes / 1e6:g} MB",
            f"CPU step, 1 thread: {_ms(self.cpu_one)}",
        ]
        if self.has_gpu:
            out += [
                f"copy to GPU, pageable memory: {_ms(self.to_gpu_pageable)}"
                f" ({gb_per_s(self.nbytes, self.to_gpu_pageable):.1f} GB/s)",
                f"copy to GPU, pinned memory: {_ms(self.to_gpu_pinned)}"
                f" ({gb_per_s(self.nbytes, self.to_gpu_pinned):.1f} GB/s; the data was pinned "
                "beforehand, and pinning it is not counted)",
                f"GPU step: {_ms(self.gpu_step)}"
                f" ({gb_per_s(2 * self.nbytes, self.gpu_step):.0f} GB/s read + written)",
                f"copy back to CPU: {_ms(self.to_cpu)}"
                f" ({gb_per_s(self.nbytes, self.to_cpu):.1f} GB/s)",
            ]
        else:
            out.append("no GPU here: nothing on the GPU side can be measured")
        return out

    def threads_line(self) -> str:
        return (
            f"CPU step, {self.threads} threads: {_ms(self.cpu_all)} "
            f"(1 thread: {_ms(self.cpu_one)}), both measured"
        )

    def verdict(self) -> str:
        """The worked example's verdict from these figures: measured on a GPU; without one,
        no verdict about this machine, and the mix with the text's GPU labelled as a mix."""
        there, step, back = self.gpu_route()
        gpu, cpu = there + step + back, self.cpu_one
        if self.has_gpu:
            pinned = self.gpu_route(pinned=True)[0] + step + back
            lines = [
                f"GPU route, measured: {_ms(there)} copy there + {_ms(step)} step + "
                f"{_ms(back)} copy back = {_ms(gpu)}",
                f"CPU route, measured: {_ms(cpu)} on 1 thread",
                f"Verdict, measured here: for one step the {_faster(cpu, gpu)}; the "
                f"copies are {(there + back) / gpu:.0%} of the GPU route.",
                f"From memory pinned beforehand the GPU route took {_ms(pinned)}; that "
                "leaves out pinning itself, a copy of its own (x.pin_memory()), so it holds "
                "only for data that is already pinned.",
            ]
            return "\n".join(lines)
        return "\n".join(
            [
                f"CPU route, measured here: {_ms(cpu)} on 1 thread",
                f"GPU route, assumed (no GPU here): {_ms(there)} + {_ms(step)} + {_ms(back)} = "
                f"{_ms(gpu)}, from the text's {SEED_LINK_GB_S:g} GB/s PCIe 4.0 link and "
                f"{SEED_GPU_MEMORY_GB_S:,.0f} GB/s GPU memory",
                "Verdict: none measured. This machine has no GPU, so it cannot tell which route "
                "is faster on it.",
                f"A labelled mix, your measured CPU against the text's assumed GPU: "
                f"{_ms(cpu)} against {_ms(gpu)}, so with a GPU like the text's the "
                f"{_faster(cpu, gpu, 'would be')}. With the text's own 0.4 ms the CPU route was "
                f"{gpu / (SEED_ONE_CORE_MS / 1e3):.1f} times faster.",
            ]
        )

    def against_seed(self) -> str:
        """How this machine's one-core time compares with the text's, and why it differs:
        adding 1 is almost no arithmetic, so how fast one core moves the data (from memory,
        or from its caches) sets the time."""
        here = self.cpu_one * 1e3
        ratio = here / SEED_ONE_CORE_MS
        moved, seed_moved = (
            gb_per_s(2 * self.nbytes, self.cpu_one),
            gb_per_s(2 * self.nbytes, SEED_ONE_CORE_MS / 1e3),
        )
        speed = (
            f"One core here moved {moved:.0f} GB/s, from memory or its caches (the step reads "
            f"{self.nbytes / 1e6:g} MB and writes {self.nbytes / 1e6:g} MB, and the timer "
            f"runs it again and again on the same tensors, which a large cache keeps); at "
            f"{SEED_ONE_CORE_MS} ms the text's core moved {seed_moved:.0f} GB/s."
        )
        if 0.8 <= ratio <= 1.25:
            return f"One core took {here:.2f} ms here, close to the text's {SEED_ONE_CORE_MS} ms. {speed}"
        word = "slower" if ratio > 1 else "faster"
        return (
            f"One core took {here:.2f} ms here against the text's {SEED_ONE_CORE_MS} ms: "
            f"{max(ratio, 1 / ratio):.1f} times {word}. Why: adding 1 is almost no "
            f"arithmetic, so the time is set mostly by how fast one core moves the data. "
            f"{speed} That speed differs several times between computers: it depends on "
            f"the memory, and on how much of the {2 * self.nbytes / 1e6:g} MB the CPU's "
            f"caches hold (many CPUs' L3 caches hold tens of MB, and the text's computer, "
            f"which the text does not name, may have answered partly from its cache). "
            f"Other programs running at the same time lower it too."
        )

    def race(self) -> Race:
        """The race on these speeds, in milliseconds, with the CPU on one thread: the same
        figure as the verdict. Without a GPU, the GPU's side is the text's assumption."""
        there, step, back = self.gpu_route()
        if self.has_gpu:
            note = "measured on this machine: CPU on 1 thread, as in the verdict; pageable copies"
        else:
            note = (
                f"CPU measured here on 1 thread, as in the verdict; no GPU here, so the "
                f"copies and the GPU step are assumed (the text's {SEED_LINK_GB_S:g} GB/s "
                f"link and {SEED_GPU_MEMORY_GB_S:,.0f} GB/s memory)"
            )
        return Race.measured(
            self.cpu_one * 1e3,
            step * 1e3,
            there * 1e3,
            back * 1e3,
            note=note,
            gpu_assumed=not self.has_gpu,
        )


def _faster(cpu: float, gpu: float, verb: str = "is") -> str:
    """ "CPU is faster, 2.4 times", "GPU route is faster, 1.2 times" or "two are about even"."""
    ratio = max(cpu, gpu) / min(cpu, gpu)
    if ratio < 1.1:
        return f"two {'are' if verb == 'is' else 'would be'} about even"
    side = "GPU route" if gpu < cpu else "CPU"
    return f"{side} {verb} faster, {ratio:.1f} times"


def measure_step(device: str, points: int = SEED_POINTS, min_run_time: float = 0.2) -> StepTimes:
    """Times ``x + 1`` on the CPU (1 thread, all threads) and, with ``device="cuda"``,
    the copies (pageable and pinned), the GPU step and the copy back."""
    if points < 1:
        raise ValueError(f"measure_step: points must be at least 1, got {points}")
    x = torch.zeros(points, 3)
    threads = torch.get_num_threads()
    env = {"x": x}
    times = dict(
        points=points,
        nbytes=x.nelement() * x.element_size(),
        threads=threads,
        cpu_one=seconds("x + 1", env, 1, min_run_time),
        cpu_all=seconds("x + 1", env, threads, min_run_time),
    )
    if device == "cuda":
        env = {"x": x, "xp": x.pin_memory(), "xg": x.to("cuda")}
        times.update(
            to_gpu_pageable=seconds("x.to('cuda')", env, 1, min_run_time),
            to_gpu_pinned=seconds("xp.to('cuda')", env, 1, min_run_time),
            gpu_step=seconds("xg + 1", env, 1, min_run_time),
            to_cpu=seconds("xg.cpu()", env, 1, min_run_time),
        )
    return StepTimes(**times)


@dataclass(frozen=True)
class BackgroundTiming:
    """The same job timed three ways, in seconds: the plain-clock times are medians of
    ``rounds`` runs."""

    device: str
    job: str
    unsynced: float
    synced: float
    benchmark: float
    rounds: int = 1

    def agree(self) -> bool:
        """Whether the three times agree: each within AGREE_WITHIN of the others."""
        times = (self.unsynced, self.synced, self.benchmark)
        return min(times) > 0 and max(times) / min(times) <= AGREE_WITHIN

    def explain(self) -> str:
        """What the three times show, decided from the times themselves."""
        times = (self.unsynced, self.synced, self.benchmark)
        spread = max(times) / min(times) if min(times) > 0 else float("inf")
        if self.device == "cuda":
            if self.unsynced * 2 <= self.synced:
                return (
                    f"Without synchronize() the clock stopped when the work was queued, "
                    f"{self.synced / self.unsynced:.0f} times too early. With it, and with "
                    f"torch.utils.benchmark, it stopped when the work was done."
                )
            return (
                f"Here the clock without synchronize() read about as much as the others "
                f"(within {spread:.1f} times): the queue was short, or something in the "
                f"job waited for the GPU. It still measures only how long it took to queue "
                f"the work."
            )
        why = (
            "On the CPU, PyTorch finishes each step before it returns, so there is nothing "
            "to wait for."
        )
        gpu = (
            " On a GPU the first would read far less than the others, because it measures "
            "only how long it took to queue the work."
        )
        if self.agree():
            return (
                f"No GPU here: the three times agree, to within {spread:.2f} times "
                f"(medians of {self.rounds} plain-clock runs). {why}{gpu}"
            )
        return (
            f"No GPU here: the three times differ by up to {spread:.1f} times, even as "
            f"medians of {self.rounds} plain-clock runs. {why} So the difference is noise: "
            f"other programs on this machine slowed some runs. Run the cell again, and "
            f"the times should come closer.{gpu}"
        )

    def lines(self) -> list[str]:
        return [
            f"job: {self.job} on {self.device} (plain-clock times: the median of "
            f"{self.rounds} run{'s' * (self.rounds != 1)})",
            f"time without synchronize(): {_ms(self.unsynced)}",
            f"time with synchronize(): {_ms(self.synced)}"
            + ("" if self.device == "cuda" else " (on the CPU there is no queue to wait for)"),
            f"time with torch.utils.benchmark: {_ms(self.benchmark)}",
        ]


def background_timing(
    device: str,
    size: int | None = None,
    repeats: int = 10,
    min_run_time: float = 0.2,
    rounds: int = 5,
) -> BackgroundTiming:
    """Times ``repeats`` matrix products with a plain clock, with the clock read after
    ``torch.cuda.synchronize()`` (each the median of ``rounds`` runs), and with
    ``torch.utils.benchmark``. On the CPU all three use one thread, so that other
    programs' load skews them alike."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a whole number of at least 1, got {rounds!r}")
    size = size or (4096 if device == "cuda" else 256)
    a = torch.rand(size, size, device=device)
    wait = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    threads = torch.get_num_threads() if device == "cuda" else 1

    def job():
        for _ in range(repeats):
            a @ a

    unsynced_runs, synced_runs = [], []
    with _threads(threads):
        job()  # warm up: the first product on a GPU also starts its maths library
        wait()
        for _ in range(rounds):  # medians: one run on a busy machine can be far off
            start = time.perf_counter()
            job()
            unsynced_runs.append(time.perf_counter() - start)  # on a GPU: only the queueing
            wait()  # drain that queue so the next timing starts empty
            start = time.perf_counter()
            job()
            wait()
            synced_runs.append(time.perf_counter() - start)
    bench = seconds("job()", {"job": job}, threads, min_run_time)
    return BackgroundTiming(
        device,
        f"{repeats} products of {size}x{size} matrices",
        statistics.median(unsynced_runs),
        statistics.median(synced_runs),
        bench,
        rounds,
    )


def event_timing(device: str, size: int = 4096, repeats: int = 10) -> str:
    """On a GPU: ``repeats`` products of ``size``×``size`` matrices timed with CUDA events,
    after a warm-up and with the queue empty before ``start`` is recorded (the pattern the
    lesson shows). Without a GPU, says what it would do."""
    if device != "cuda":
        return (
            "No GPU here: CUDA events exist only on a GPU. On one, this cell times "
            f"{repeats} products of {size}x{size} matrices with the pattern above."
        )
    a = torch.rand(size, size, device="cuda")

    def job():
        for _ in range(repeats):
            a @ a

    job()  # warm-up: the first product also starts the maths library
    torch.cuda.synchronize()  # nothing else queued: only the work between the events counts
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    job()
    end.record()
    torch.cuda.synchronize()  # wait until `end` has happened before reading it
    return (
        f"time with CUDA events: {start.elapsed_time(end):.3f} ms "
        f"({repeats} products of {size}x{size} matrices, on the GPU's clock)"
    )


@contextmanager
def _threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def rated_link_gb_s() -> tuple[float, str] | None:
    """The GPU's PCIe link, rated GB/s each way, and its name (e.g. "PCIe 4.0 x16"),
    read from nvidia-smi; None where that is not available."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [
                smi,
                "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
                "--format=csv,noheader,nounits",
                "-i",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        gen, width = (int(v) for v in out.strip().splitlines()[0].split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    if gen not in PCIE_LANE_GB_S:
        return None
    return PCIE_LANE_GB_S[gen] * width, f"PCIe {gen}.0 x{width}"


def link_report(times: StepTimes) -> str:
    """How this machine's copies compare with its link's rated speed."""
    if not times.has_gpu:
        return (
            "No GPU here, so no link to measure. The verdict and the race assumed "
            f"{SEED_LINK_GB_S:g} GB/s, the text's PCIe 4.0 figure."
        )
    pinned = gb_per_s(times.nbytes, times.to_gpu_pinned)
    pageable = gb_per_s(times.nbytes, times.to_gpu_pageable)
    text = (
        f"Your copies reached {pinned:.1f} GB/s from pinned memory (pinned beforehand; "
        f"pinning not counted) and {pageable:.1f} GB/s from pageable memory."
    )
    rated = rated_link_gb_s()
    if rated is not None:
        gb_s, name = rated
        text += (
            f" This GPU's link, {name}, is rated {gb_s:.1f} GB/s each way: pinned copies "
            f"reached {pinned / gb_s:.0%} of that."
        )
    return text


def _ms(secs: float) -> str:
    return f"{secs * 1e3:.3f} ms"
