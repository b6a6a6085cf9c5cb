"""A small network trained on a synthetic data set, and what reading its loss costs.

No widgets here (``training_widget`` draws this): the data set (three spirals, made with
torch, nothing to download), the network, and a ``Trainer`` that runs training steps on
any device, keeps the loss on that device and reads it only every ``read_every`` steps.
Each read is ``.item()``, which on a GPU makes the CPU wait until the GPU has caught up.

Timing: ``Trainer.run`` measures the wall time of the steps it ran, with
``time.perf_counter``. On a GPU it calls ``torch.cuda.synchronize()`` before it reads
the clock, so the time covers the work done and not only the work queued. That is one
extra wait per call to ``run``, not per step; the widget calls it a few times a second.

On the CPU the steps run on one thread, as ``torch.utils.benchmark`` times them: a
network this small gains nothing from more, and on a busy machine extra threads wait for
each other at every operation (measured once, on the 2-core development machine while it
ran other work: one thread ran 70 times as many steps per second as two).

The whole data set lives on the training device, drawn on the CPU and copied there once: each batch is picked
by an index tensor on the same device, so a step needs no copy from the CPU and no wait.
(A plain ``.to("cuda")`` of a batch in pageable CPU memory waits for the GPU too: PyTorch's
performance tuning guide lists it with ``.item()``.)
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

CLASSES = 3
POINTS = 3000  # 1,000 a spiral
HIDDEN = 64
LEARNING_RATE = 0.01


def spirals(
    points: int = POINTS,
    classes: int = CLASSES,
    noise: float = 0.5,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``points`` 2D points on ``classes`` interleaved spirals: (inputs float32 [N, 2],
    labels int64 [N]), made on ``device``. The same seed gives the same points anywhere:
    they are drawn on the CPU and copied once."""
    if classes < 2 or points < classes:
        raise ValueError(
            f"spirals: need at least 2 classes and a point each, got "
            f"{points} points and {classes} classes"
        )
    generator = torch.Generator().manual_seed(seed)
    per = points // classes
    radius = torch.linspace(0.05, 1.0, per).repeat(classes)
    label = torch.arange(classes).repeat_interleave(per)
    angle = (
        radius * 4.0
        + label * (2 * math.pi / classes)
        + torch.randn(per * classes, generator=generator) * noise
    )
    inputs = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
    return inputs.to(device), label.to(device)


def make_network(
    classes: int = CLASSES, hidden: int = HIDDEN, seed: int = 0, device: str | torch.device = "cpu"
) -> torch.nn.Sequential:
    """Two hidden layers of ``hidden`` units: 2 inputs, ``classes`` outputs (logits)."""
    torch.manual_seed(seed)
    network = torch.nn.Sequential(
        torch.nn.Linear(2, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.ReLU(),
        torch.nn.Linear(hidden, classes),
    )
    return network.to(device)


def parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def waits(steps: int, read_every: int) -> int:
    """How many times a loop of ``steps`` steps reads its loss when it reads every
    ``read_every`` steps (at steps read_every, 2 × read_every, ...): on a GPU, each
    read is one wait of the CPU for the GPU."""
    if steps < 0 or read_every < 1:
        raise ValueError(f"waits: need steps >= 0 and read_every >= 1, got {steps}, {read_every}")
    return steps // read_every


@dataclass(frozen=True)
class Reading:
    """One read of the loss: its mean over the steps since the last read."""

    step: int
    loss: float


@dataclass
class Segment:
    """Steps run with one setting of the controls, and the time they took (measured)."""

    device: str
    read_every: int
    batch_size: int
    steps: int = 0
    seconds: float = 0.0
    reads: int = 0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def samples_per_s(self) -> float:
        return self.steps_per_s * self.batch_size

    def line(self) -> str:
        """e.g. "cpu, read every 10 steps, batch 64: 1,750 steps/s, 112,000 samples/s
        (measured over 1,200 steps)"."""
        return (
            f"{self.device}, read every {_steps(self.read_every)}, batch {self.batch_size}: "
            f"{self.steps_per_s:,.0f} steps/s, {self.samples_per_s:,.0f} samples/s "
            f"(measured over {self.steps:,} steps)"
        )


@dataclass
class Trainer:
    """Trains ``make_network()`` on ``spirals()`` with Adam, on ``device``.

    ``run(steps=..., seconds=...)`` trains on; ``readings`` holds the loss as read,
    ``segments`` the measured speed for each setting of ``read_every`` and
    ``batch_size`` (change them with ``set_read_every`` / ``set_batch_size``).
    """

    device: str = "cpu"
    batch_size: int = 64
    read_every: int = 10
    seed: int = 0
    step: int = 0
    readings: list[Reading] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)

    def __post_init__(self):
        _check_positive("batch_size", self.batch_size)
        _check_positive("read_every", self.read_every)
        self.inputs, self.labels = spirals(seed=self.seed, device=self.device)
        self.model = make_network(seed=self.seed, device=self.device)
        # The optimizer after the model is on its device: it holds these parameters.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=LEARNING_RATE)
        self.generator = torch.Generator(device=self.device).manual_seed(self.seed)
        self._total = torch.zeros((), device=self.device)  # the running loss, on the device
        self._count = 0
        self.segments = [self._new_segment()]

    # -- the controls --------------------------------------------------------------------
    def set_read_every(self, read_every: int) -> None:
        _check_positive("read_every", read_every)
        if read_every != self.read_every:
            self.read_every = read_every
            self._next_segment()

    def set_batch_size(self, batch_size: int) -> None:
        _check_positive("batch_size", batch_size)
        if batch_size != self.batch_size:
            self.batch_size = batch_size
            self._next_segment()

    @property
    def segment(self) -> Segment:
        return self.segments[-1]

    def finished_segments(self) -> list[Segment]:
        return [s for s in self.segments if s.steps > 0]

    # -- training ------------------------------------------------------------------------
    def run(self, steps: int | None = None, seconds: float | None = None) -> int:
        """Train for ``steps`` steps, or until ``seconds`` have passed, whichever comes
        first (at least one step); returns the steps run. The time they took is added to
        the current segment."""
        if steps is None and seconds is None:
            raise ValueError("run: give steps, seconds or both")
        segment, done = self.segment, 0
        with _threads_for(self.device):
            start = time.perf_counter()
            while (steps is None or done < steps) and (
                seconds is None or done == 0 or time.perf_counter() - start < seconds
            ):
                self._one_step(segment)
                done += 1
            if self.device != "cpu" and torch.cuda.is_available():
                torch.cuda.synchronize()  # time the work done, not only the work queued
            segment.seconds += time.perf_counter() - start
        segment.steps += done
        return done

    def _one_step(self, segment: Segment) -> None:
        index = torch.randint(
            0, len(self.labels), (self.batch_size,), device=self.device, generator=self.generator
        )
        loss = F.cross_entropy(self.model(self.inputs[index]), self.labels[index])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self._total += loss.detach()  # stays on the device: no wait
        self._count += 1
        self.step += 1
        if self.step % self.read_every == 0:
            mean = (self._total / self._count).item()  # the read: on a GPU, a wait
            self.readings.append(Reading(self.step, mean))
            self._total.zero_()
            self._count = 0
            segment.reads += 1

    def accuracy(self) -> float:
        """The share of the data set the network classifies right, in evaluation mode and
        without gradients; read once."""
        self.model.eval()
        try:
            with torch.no_grad():
                right = (self.model(self.inputs).argmax(dim=1) == self.labels).float().mean()
        finally:
            self.model.train()
        return right.item()

    # -- segments ------------------------------------------------------------------------
    def _new_segment(self) -> Segment:
        return Segment(str(self.device), self.read_every, self.batch_size)

    def _next_segment(self) -> None:
        if self.segment.steps > 0:
            self.segments.append(self._new_segment())
        else:
            self.segments[-1] = self._new_segment()


@contextmanager
def _threads_for(device: str):
    """One CPU thread while training on the CPU; the setting is put back afterwards."""
    if str(device) != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")


def _steps(n: int) -> str:
    return "step" if n == 1 else f"{n} steps"


# -- what reading the loss costs, measured -------------------------------------------------
@dataclass(frozen=True)
class ReadCost:
    """Steps per second of the same training, reading the loss every ``often`` step and
    every ``rarely`` steps, measured with ``torch.utils.benchmark`` on ``device``."""

    device: str
    batch_size: int
    often: int
    rarely: int
    often_steps_per_s: float
    rarely_steps_per_s: float

    @property
    def slowdown(self) -> float:
        """How many times slower reading ``often`` was (1.0: no slower)."""
        return self.rarely_steps_per_s / self.often_steps_per_s

    def lines(self) -> list[str]:
        return [
            f"read every {_steps(self.often)}: {self.often_steps_per_s:,.0f} steps/s "
            f"(measured on {self.device}, batch {self.batch_size})",
            f"read every {_steps(self.rarely)}: {self.rarely_steps_per_s:,.0f} steps/s "
            f"(measured on {self.device}, batch {self.batch_size})",
        ]

    def explain(self) -> str:
        change = self._change()
        if self.device == "cuda":
            return (
                f"On this GPU, reading every step was {change} (measured). Each read made the "
                "CPU wait until the GPU had finished the steps queued so far, and the GPU then "
                "sat idle while the CPU queued the next one. Read rarely, and the CPU stays "
                "ahead, queueing work while the GPU computes."
            )
        why = (
            "On a CPU there is no queue: each operation has finished when its Python call "
            "returns, so .item() has nothing to wait for: the measured cost is the read and its "
            "bookkeeping (a mean worked out, one number copied out, the total reset)."
        )
        gpu = (
            "No GPU here, so nothing was measured on one. On a GPU a read makes the CPU wait "
            "for the queue to empty: how much that costs depends on how long the GPU's step "
            "takes next to the CPU's time to queue it. The widget's \"modelled GPU\" mode "
            "shows it, with made-up times."
        )
        if self.slowdown < 1.15:
            return f"On this CPU, reading every step was {change} (measured): little. {why} {gpu}"
        return (
            f"On this CPU, reading every step was {change} (measured). {why} A difference this "
            "large is more likely other programs sharing this machine's cores than the "
            f"reads: run the cell again and compare. {gpu}"
        )

    def _change(self) -> str:
        if self.slowdown >= 1.5:
            return f"{self.slowdown:.1f} times slower"
        percent = (self.slowdown - 1) * 100
        if abs(percent) < 0.5:
            return "as fast (under 0.5% apart)"
        return f"{abs(percent):.0f}% {'slower' if percent > 0 else 'faster'}"


def measure_reads(
    device: str,
    often: int = 1,
    rarely: int = 100,
    batch_size: int = 64,
    steps: int = 100,
    min_run_time: float = 0.3,
) -> ReadCost:
    """Times ``steps`` training steps reading the loss every ``often`` step, then every
    ``rarely`` steps, with ``torch.utils.benchmark`` (it warms up, repeats, and on a GPU
    synchronizes before reading the clock). One CPU thread, as in the first unit."""
    from torch.utils import benchmark

    speeds = []
    for every in (often, rarely):
        trainer = Trainer(device=device, batch_size=batch_size, read_every=every)
        timer = benchmark.Timer(stmt=f"trainer.run(steps={steps})", globals={"trainer": trainer})
        speeds.append(steps / timer.blocked_autorange(min_run_time=min_run_time).median)
    return ReadCost(str(device), batch_size, often, rarely, *speeds)


# -- what reading the loss would cost on a GPU, modelled -----------------------------------
@dataclass(frozen=True)
class GpuModel:
    """A GPU training loop as plain arithmetic, with made-up times: no GPU is measured.

    GPU work is queued (PyTorch's CUDA semantics, asynchronous execution): the CPU spends
    ``queue_ms`` queueing one step's operations and moves on, while the GPU runs the steps in
    order, ``gpu_ms(batch)`` each. A read of the loss (``.item()``) makes the CPU wait until
    the GPU has run every step queued so far, then copy one number back (``read_ms``); only
    then does the CPU queue the next step, while the GPU sits idle.

    So for ``n`` steps between reads, the steps queued at ``queue_ms`` each and run at
    ``gpu_ms`` each finish at ``max(n * queue_ms + gpu_ms, queue_ms + n * gpu_ms)``, and
    the read adds ``read_ms``. Never reading, a step takes ``max(queue_ms, gpu_ms)``: the
    slower of the two sets the pace, and the other one hides behind it.

    The default times are made up, of a plausible shape for a network this small (the
    lesson says so wherever it shows them): many tiny operations, so queueing a step takes
    the CPU longer than running it takes the GPU, unless the batch is large.
    """

    queue_ms: float = 0.5  # CPU time to queue one step's operations (made up)
    gpu_fixed_ms: float = 0.05  # GPU time per step, whatever the batch (made up)
    gpu_per_sample_ms: float = 0.001  # GPU time per sample in the batch (made up)
    read_ms: float = 0.02  # copying the loss back, once the GPU has caught up (made up)

    def __post_init__(self):
        for name in ("queue_ms", "gpu_fixed_ms", "gpu_per_sample_ms", "read_ms"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"GpuModel: {name} must be a finite number >= 0, got {value!r}")
        if self.queue_ms + self.gpu_fixed_ms <= 0:
            raise ValueError("GpuModel: a step must take some time")

    def gpu_ms(self, batch_size: int) -> float:
        _check_positive("batch_size", batch_size)
        return self.gpu_fixed_ms + self.gpu_per_sample_ms * batch_size

    def ms_per_step(self, read_every: int | None, batch_size: int) -> float:
        """Mean time of a step, reading the loss every ``read_every`` steps (None: never)."""
        queue, gpu = self.queue_ms, self.gpu_ms(batch_size)
        if read_every is None:
            return max(queue, gpu)
        _check_positive("read_every", read_every)
        n = read_every
        return (max(n * queue + gpu, queue + n * gpu) + self.read_ms) / n

    def steps_per_s(self, read_every: int | None, batch_size: int) -> float:
        return 1000 / self.ms_per_step(read_every, batch_size)

    def gpu_busy(self, read_every: int | None, batch_size: int) -> float:
        """The share of the time the GPU computes (0 to 1)."""
        return self.gpu_ms(batch_size) / self.ms_per_step(read_every, batch_size)

    def slowdown(self, read_every: int, batch_size: int, against: int = 100) -> float:
        """How many times slower reading every ``read_every`` steps is than every ``against``."""
        return self.ms_per_step(read_every, batch_size) / self.ms_per_step(against, batch_size)

    def assumptions(self, batch_size: int) -> str:
        return (
            f"made-up times: the CPU queues a step in {self.queue_ms:g} ms; the GPU runs it in "
            f"{self.gpu_ms(batch_size):.3g} ms for a batch of {batch_size}; a read copies the "
            f"loss back in {self.read_ms:g} ms"
        )

    def sentence(self, read_every: int, batch_size: int, against: int = 100) -> str:
        """e.g. "modelled GPU, read every step, batch 64: 1,580 steps/s, GPU busy 18%;
        every 100 steps: 1,990 steps/s; 1.26 times slower (made-up times: ...)"."""
        return (
            f"modelled GPU, read every {_steps(read_every)}, batch {batch_size}: "
            f"{self.steps_per_s(read_every, batch_size):,.0f} steps/s, GPU busy "
            f"{self.gpu_busy(read_every, batch_size):.0%}; every {_steps(against)}: "
            f"{self.steps_per_s(against, batch_size):,.0f} steps/s, GPU busy "
            f"{self.gpu_busy(against, batch_size):.0%}; "
            f"{_ratio(self.slowdown(read_every, batch_size, against))} "
            f"({self.assumptions(batch_size)}; not a measurement)"
        )


def _ratio(slowdown: float) -> str:
    if abs(slowdown - 1) < 0.005:
        return "as fast"
    if slowdown > 1:
        return f"{slowdown:.2f} times slower"
    return f"{1 / slowdown:.2f} times faster"
