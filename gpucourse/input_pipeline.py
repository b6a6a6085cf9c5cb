"""An input pipeline as plain arithmetic, with no widgets: load, copy, compute.

Each batch goes through three stages:

* **load**: a ``DataLoader`` worker reads, decodes and augments the batch on the CPU
  (and, when the batch is copied as float32, also converts and normalizes it there);
* **copy**: the batch crosses the link to the GPU;
* **compute**: the GPU runs the training step on it.

``Pipeline(speeds, settings).spans(batches)`` schedules ``batches`` batches as the
pipeline would run them, and ``steady_ms()`` is the time per batch once it is full.
The rules, each one a fact about PyTorch or CUDA (the lesson cites the sources):

* with ``workers = 0`` the main process loads each batch itself, and every stage waits
  for the one before: this, and only this, is what "one after another" means here. It
  assumes a loop that waits for the GPU at every step (it reads the loss, say); a loop that
  never waits loads batch i + 1 while the GPU computes step i, and its blocking copy, pinned
  or not, waits for the previous step: about max(load, compute) + copy, as the lesson's Go
  further says;
* with ``workers >= 1`` each worker loads whole batches, in turn (batch i goes to worker
  i mod workers), at most ``prefetch_factor = 2`` batches each ahead of the loop; more
  workers than CPU cores share those cores;
* a copy and the step run on one CUDA stream, in order, unless the copy is on a side
  stream **and** comes from pinned memory: only then can the copy of the next batch
  overlap the step on this one;
* a pageable copy is slower than a pinned one (the driver stages it through a pinned
  buffer); a float32 batch has 4 times the bytes of a uint8 one.

Left out, and said so where it is shown: pinning, itself a copy on the CPU (done in a
background thread when there are workers, inline in the main process when there are none),
the GPU's conversion of a uint8 batch (tenths of a millisecond for 256 images as four separate
operations at an H100's memory speed, the lesson's Go further counts it), and the time to
queue work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

STAGES = ("load", "copy", "compute")
DTYPES = {"uint8": 1, "float32": 4}  # bytes per number
PREFETCH_FACTOR = 2  # DataLoader's default: batches loaded ahead, per worker


@dataclass(frozen=True)
class Settings:
    """The learner's choices."""

    workers: int = 0  # DataLoader(num_workers=...)
    pinned: bool = False  # DataLoader(pin_memory=True): pinned batches
    side_stream: bool = False  # the copy issued on a second CUDA stream (a prefetcher)
    dtype: str = "float32"  # the dtype the batch crosses the link in

    def __post_init__(self):
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"Settings: workers must be a whole number >= 0, got {self.workers!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"Settings: dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")

    @property
    def overlaps_copy(self) -> bool:
        """The copy of one batch can run during the step on another: a side stream and
        pinned memory, both (PyTorch's guide to pin_memory and non_blocking)."""
        return self.pinned and self.side_stream


@dataclass(frozen=True)
class Speeds:
    """What one batch costs at each stage, and where each figure comes from.

    ``source`` maps each of ``load``, ``normalize``, ``copy`` and ``compute`` to words
    that say whether it was measured here or assumed, and from where."""

    batch: int  # images per batch
    uint8_bytes: int  # bytes of one batch as uint8
    load_ms: float  # one worker: read, decode and augment one batch (uint8)
    normalize_ms: float  # one worker: convert a uint8 batch to normalized float32
    pinned_gb_s: float  # copy speed from pinned memory
    pageable_gb_s: float  # copy speed from pageable memory
    compute_ms: float  # the GPU's step on one batch
    cores: int | None = None  # CPU cores the workers share; None: as many as workers
    source: tuple[tuple[str, str], ...] = ()
    name: str = ""

    def __post_init__(self):
        for field in ("load_ms", "normalize_ms", "pinned_gb_s", "pageable_gb_s", "compute_ms"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"Speeds: {field} must be a finite number >= 0, got {value!r}")
        if min(self.pinned_gb_s, self.pageable_gb_s) <= 0:
            raise ValueError("Speeds: copy speeds must be more than 0 GB/s")
        if self.cores is not None and self.cores < 1:
            raise ValueError(f"Speeds: cores must be at least 1, got {self.cores!r}")

    def said(self, stage: str) -> str:
        """Where the figure of ``stage`` comes from, in words."""
        return dict(self.source).get(stage, "")

    def stage_line(self, stage: str) -> str:
        """The figure of ``stage`` for one batch, its batch size, and where it comes from."""
        mb = self.uint8_bytes / 1e6
        figures = {
            "load": f"{self.load_ms:.3g} ms for one worker to load a batch of {self.batch}",
            "normalize": f"{self.normalize_ms:.3g} ms more to make a batch of {self.batch} float32",
            "copy": (
                f"{self.pinned_gb_s:.3g} GB/s from pinned memory, {self.pageable_gb_s:.3g} GB/s "
                f"from pageable: {mb / self.pinned_gb_s:.3g} ms for the {mb:.3g} MB "
                f"of a batch of {self.batch} as uint8, from pinned memory"
            ),
            "compute": f"{self.compute_ms:.3g} ms for the GPU's step on a batch of {self.batch}",
        }
        if stage not in figures:
            raise ValueError(f"stage must be one of {sorted(figures)}, got {stage!r}")
        return f"{stage}: {figures[stage]} ({self.said(stage)})"


@dataclass(frozen=True)
class Span:
    """One batch in one stage: drawn as a bar from ``start`` to ``end`` (ms)."""

    stage: str
    batch: int  # 0-based
    row: int  # the loader worker for "load"; 0 otherwise
    start: float
    end: float


class Pipeline:
    """The three stages of ``speeds`` under ``settings``."""

    def __init__(self, speeds: Speeds, settings: Settings):
        self.speeds, self.settings = speeds, settings

    # -- what one batch costs at each stage -------------------------------------------
    def batch_bytes(self) -> int:
        return self.speeds.uint8_bytes * DTYPES[self.settings.dtype]

    def load_ms(self) -> float:
        """One worker's time for one batch; normalizing on the CPU is part of it for a
        float32 batch. Workers beyond the CPU's cores share them, so each one is slower."""
        one = self.speeds.load_ms + (
            self.speeds.normalize_ms if self.settings.dtype == "float32" else 0.0
        )
        cores, workers = self.speeds.cores, self.settings.workers
        if cores is not None and workers > cores:
            one *= workers / cores
        return one

    def copy_ms(self) -> float:
        gb_s = self.speeds.pinned_gb_s if self.settings.pinned else self.speeds.pageable_gb_s
        return self.batch_bytes() / (gb_s * 1e9) * 1e3

    def compute_ms(self) -> float:
        return self.speeds.compute_ms

    def stage_ms(self) -> dict[str, float]:
        """Each stage's time per batch: the loaders together deliver one batch every
        load_ms / workers."""
        workers = max(self.settings.workers, 1)
        return {
            "load": self.load_ms() / workers,
            "copy": self.copy_ms(),
            "compute": self.compute_ms(),
        }

    # -- the steady state ---------------------------------------------------------------
    def steady_ms(self) -> float:
        """Time per batch once the pipeline is full."""
        stage = self.stage_ms()
        if self.settings.workers == 0:
            return sum(stage.values())
        if self.settings.overlaps_copy:
            return max(stage.values())
        return max(stage["load"], stage["copy"] + stage["compute"])

    def bottleneck(self) -> str:
        """The stage to speed up first: the slowest one, or, when the copy and the step
        share one stream and together set the pace, "copy + compute"."""
        stage = self.stage_ms()
        if (
            self.settings.workers
            and not self.settings.overlaps_copy
            and stage["copy"] + stage["compute"] >= stage["load"]
        ):
            return "copy + compute"
        return max(STAGES, key=lambda name: stage[name])

    def gpu_busy(self) -> float:
        """The share of time the GPU computes, in steady state (0 to 1)."""
        steady = self.steady_ms()
        return 1.0 if steady == 0 else self.compute_ms() / steady

    # -- the timeline -------------------------------------------------------------------
    def spans(self, batches: int = 8) -> list[Span]:
        """Every batch through every stage, scheduled by the rules in the module's doc."""
        if isinstance(batches, bool) or not isinstance(batches, int) or batches < 1:
            raise ValueError(f"batches must be a whole number of at least 1, got {batches!r}")
        workers = self.settings.workers
        load, copy, compute = self.load_ms(), self.copy_ms(), self.compute_ms()
        spans: list[Span] = []
        worker_free = [0.0] * max(workers, 1)
        copy_starts: list[float] = []
        copy_end = compute_end = 0.0
        for i in range(batches):
            if workers == 0:  # the main process: after the previous step has finished
                load_start = compute_end
                row = 0
            else:
                row = i % workers
                load_start = worker_free[row]
                ahead = i - PREFETCH_FACTOR * workers
                if ahead >= 0:  # no more than prefetch_factor batches per worker waiting
                    load_start = max(load_start, copy_starts[ahead])
            load_end = load_start + load
            worker_free[row] = load_end
            copy_start = max(load_end, copy_end)
            if not self.settings.overlaps_copy:  # one stream: after the previous step
                copy_start = max(copy_start, compute_end)
            copy_end = copy_start + copy
            compute_start = max(copy_end, compute_end)
            compute_end = compute_start + compute
            copy_starts.append(copy_start)
            spans += [
                Span("load", i, row, load_start, load_end),
                Span("copy", i, 0, copy_start, copy_end),
                Span("compute", i, 0, compute_start, compute_end),
            ]
        return spans

    def summary(self) -> str:
        """One sentence: the time per batch, the bottleneck and the GPU's busy share."""
        return (
            f"{self.steady_ms():.3g} ms a batch in steady state · bottleneck: "
            f"{self.bottleneck()} · GPU busy {self.gpu_busy():.0%} of the time"
        )

    def with_settings(self, **changes) -> Pipeline:
        return Pipeline(self.speeds, replace(self.settings, **changes))


# -- assumed speeds ---------------------------------------------------------------------------
IMAGES = 256
SIDE = 224
CHANNELS = 3
LINK_GB_S = 25.0  # the first unit's figure for pinned copies over PCIe 4.0 x16


def assumed_speeds() -> Speeds:
    """A made-up scenario with a real shape: a batch of 256 RGB images of 224×224, the first
    unit's 25 GB/s link for pinned copies, and made-up load, normalize and step times."""
    return Speeds(
        batch=IMAGES,
        uint8_bytes=IMAGES * CHANNELS * SIDE * SIDE,
        load_ms=20.0,
        normalize_ms=6.0,
        pinned_gb_s=LINK_GB_S,
        pageable_gb_s=LINK_GB_S / 2,
        compute_ms=8.0,
        cores=None,
        name="assumed: made-up stage times, the first unit's link speed",
        source=(
            ("load", "made up: 20 ms for one worker to load a batch"),
            ("normalize", "made up: 6 ms more to convert and normalize it on the CPU"),
            (
                "copy",
                f"assumed: {LINK_GB_S:g} GB/s from pinned memory (the first unit's "
                "PCIe 4.0 x16 figure), made up: half that from pageable memory",
            ),
            ("compute", "made up: an 8 ms step on the GPU"),
        ),
    )
