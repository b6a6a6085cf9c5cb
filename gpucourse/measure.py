"""Measurements behind the worked example and "GPU work runs in the background".

Everything is timed with ``torch.utils.benchmark.Timer``, which warms up, repeats,
and on a GPU waits for the queue (``torch.cuda.synchronize``) before it reads the
clock. ``min_run_time`` keeps each figure short enough for the lesson's "Run all".

The lines printed to learners have a stable shape, ``<what>: <number> <unit>``, so
tests can read them back (``tests/test_lesson_gpu.py``).
"""
from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.utils import benchmark

from .race import Race

# The seed's figures for the worked example, which came from one computer.
SEED_POINTS = 1_000_000
SEED_LINK_GB_S = 25.0          # PCIe 4.0 x16 in practice, pinned memory
SEED_GPU_MEMORY_GB_S = 1500.0  # about an A100's memory bandwidth
SEED_ONE_CORE_MS = 0.4

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
    The GPU fields stay None on a machine without one."""

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

    def gpu_route(self) -> tuple[float, float, float]:
        """(copy there, step, copy back) in seconds: measured on a GPU; on a CPU-only
        machine, from the seed's link and GPU-memory speeds."""
        if self.has_gpu:
            return self.to_gpu_pinned, self.gpu_step, self.to_cpu
        copy = self.nbytes / (SEED_LINK_GB_S * 1e9)
        return copy, 2 * self.nbytes / (SEED_GPU_MEMORY_GB_S * 1e9), copy

    def lines(self) -> list[str]:
        out = [f"data: {self.points:,} points x 3 numbers x 4 bytes = {self.nbytes / 1e6:g} MB",
               f"CPU step, 1 thread: {_ms(self.cpu_one)}",
               f"CPU step, {self.threads} threads: {_ms(self.cpu_all)}"]
        if self.has_gpu:
            out += [
                f"copy to GPU, pageable memory: {_ms(self.to_gpu_pageable)}"
                f" ({gb_per_s(self.nbytes, self.to_gpu_pageable):.1f} GB/s)",
                f"copy to GPU, pinned memory: {_ms(self.to_gpu_pinned)}"
                f" ({gb_per_s(self.nbytes, self.to_gpu_pinned):.1f} GB/s)",
                f"GPU step: {_ms(self.gpu_step)}"
                f" ({gb_per_s(2 * self.nbytes, self.gpu_step):.0f} GB/s read + written)",
                f"copy back to CPU: {_ms(self.to_cpu)}"
                f" ({gb_per_s(self.nbytes, self.to_cpu):.1f} GB/s)",
            ]
        return out

    def verdict(self) -> str:
        there, step, back = self.gpu_route()
        gpu = there + step + back
        source = ("measured, pinned copies" if self.has_gpu else
                  f"no GPU here, so assumed: {SEED_LINK_GB_S:g} GB/s link, "
                  f"{SEED_GPU_MEMORY_GB_S:,.0f} GB/s GPU memory")
        lines = [f"GPU route: {_ms(there)} + {_ms(step)} + {_ms(back)} = {_ms(gpu)} ({source})",
                 f"CPU route: {_ms(self.cpu_one)} on 1 thread, "
                 f"{_ms(self.cpu_all)} on {self.threads} threads"]
        best_cpu = min(self.cpu_one, self.cpu_all)
        if gpu < best_cpu:
            lines.append(f"Verdict: for one step the GPU route is faster here, "
                         f"{best_cpu / gpu:.1f} times.")
        else:
            lines.append(f"Verdict: for one step the CPU is faster here, "
                         f"{gpu / best_cpu:.1f} times; the copies cost "
                         f"{(there + back) / gpu:.0%} of the GPU route.")
        return "\n".join(lines)

    def against_seed(self) -> str:
        """Says plainly how this machine's one-core time compares with the seed's."""
        here = self.cpu_one * 1e3
        ratio = here / SEED_ONE_CORE_MS
        if 0.8 <= ratio <= 1.25:
            return (f"One core took {here:.2f} ms here, close to the text's "
                    f"{SEED_ONE_CORE_MS} ms.")
        word = "slower" if ratio > 1 else "faster"
        return (f"The text says one core takes about {SEED_ONE_CORE_MS} ms; here it took "
                f"{here:.2f} ms, {max(ratio, 1 / ratio):.1f} times {word}. The text's figures "
                f"came from one computer; yours are measured.")

    def race(self) -> Race:
        """The race on these speeds, in milliseconds, with the CPU on one thread
        as in the worked example."""
        there, step, back = self.gpu_route()
        note = ("measured on this GPU" if self.has_gpu else
                "CPU measured here; link and GPU speeds assumed")
        return Race.measured(self.cpu_one * 1e3, step * 1e3, there * 1e3, back * 1e3, note=note)


def measure_step(device: str, points: int = SEED_POINTS, min_run_time: float = 0.2) -> StepTimes:
    """Times ``x + 1`` on the CPU (1 thread, all threads) and, with ``device="cuda"``,
    the copies (pageable and pinned), the GPU step and the copy back."""
    if points < 1:
        raise ValueError(f"measure_step: points must be at least 1, got {points}")
    x = torch.zeros(points, 3)
    threads = torch.get_num_threads()
    env = {"x": x}
    times = dict(points=points, nbytes=x.nelement() * x.element_size(), threads=threads,
                 cpu_one=seconds("x + 1", env, 1, min_run_time),
                 cpu_all=seconds("x + 1", env, threads, min_run_time))
    if device == "cuda":
        env = {"x": x, "xp": x.pin_memory(), "xg": x.to("cuda")}
        times.update(to_gpu_pageable=seconds("x.to('cuda')", env, 1, min_run_time),
                     to_gpu_pinned=seconds("xp.to('cuda')", env, 1, min_run_time),
                     gpu_step=seconds("xg + 1", env, 1, min_run_time),
                     to_cpu=seconds("xg.cpu()", env, 1, min_run_time))
    return StepTimes(**times)


@dataclass(frozen=True)
class BackgroundTiming:
    """The same job timed three ways, in seconds."""

    device: str
    job: str
    unsynced: float
    synced: float
    benchmark: float

    def explain(self) -> str:
        if self.device == "cuda":
            return (f"Without synchronize() the clock stopped when the work was queued, "
                    f"{self.synced / self.unsynced:.0f} times too early. With it, and with "
                    f"torch.utils.benchmark, it stopped when the work was done.")
        return ("No GPU here: on the CPU, PyTorch finishes each step before it returns, so "
                "the three times agree. On a GPU the first would read far less than the "
                "others, because it measures only how long it took to queue the work.")

    def lines(self) -> list[str]:
        return [f"job: {self.job} on {self.device}",
                f"time without synchronize(): {_ms(self.unsynced)}",
                f"time with synchronize(): {_ms(self.synced)}"
                + ("" if self.device == "cuda" else " (on the CPU there is no queue to wait for)"),
                f"time with torch.utils.benchmark: {_ms(self.benchmark)}"]


def background_timing(device: str, size: int | None = None, repeats: int = 10,
                      min_run_time: float = 0.2) -> BackgroundTiming:
    """Times ``repeats`` matrix products with a plain clock, with the clock read after
    ``torch.cuda.synchronize()``, and with ``torch.utils.benchmark``. On the CPU all
    three use one thread, so that other programs' load skews them alike."""
    size = size or (4096 if device == "cuda" else 256)
    a = torch.rand(size, size, device=device)
    wait = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    threads = torch.get_num_threads() if device == "cuda" else 1

    def job():
        for _ in range(repeats):
            a @ a

    with _threads(threads):
        job()  # warm up: the first product on a GPU also starts its maths library
        wait()
        start = time.perf_counter()
        job()
        unsynced = time.perf_counter() - start  # on a GPU: only the time to queue the work
        wait()  # drain that queue so the next timing starts empty
        start = time.perf_counter()
        job()
        wait()
        synced = time.perf_counter() - start
    bench = seconds("job()", {"job": job}, threads, min_run_time)
    return BackgroundTiming(device, f"{repeats} products of {size}x{size} matrices",
                            unsynced, synced, bench)


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
        out = subprocess.run([smi, "--query-gpu=pcie.link.gen.max,pcie.link.width.max",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        gen, width = (int(v) for v in out.strip().splitlines()[0].split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    if gen not in PCIE_LANE_GB_S:
        return None
    return PCIE_LANE_GB_S[gen] * width, f"PCIe {gen}.0 x{width}"


def link_report(times: StepTimes) -> str:
    """How this machine's copies compare with its link's rated speed."""
    if not times.has_gpu:
        return ("No GPU here, so no link to measure. The race's measured mode assumed "
                f"{SEED_LINK_GB_S:g} GB/s, the text's PCIe 4.0 figure.")
    pinned = gb_per_s(times.nbytes, times.to_gpu_pinned)
    pageable = gb_per_s(times.nbytes, times.to_gpu_pageable)
    text = (f"Your copies reached {pinned:.1f} GB/s from pinned memory and {pageable:.1f} GB/s "
            f"from pageable memory.")
    rated = rated_link_gb_s()
    if rated is not None:
        gb_s, name = rated
        text += (f" This GPU's link, {name}, is rated {gb_s:.1f} GB/s each way: pinned copies "
                 f"reached {pinned / gb_s:.0%} of that.")
    return text


def _ms(secs: float) -> str:
    return f"{secs * 1e3:.3f} ms"
