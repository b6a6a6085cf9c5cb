"""The copy-versus-compute race as plain arithmetic, with no widgets.

Two lanes do the same job, ``steps`` steps over the same numbers:

* the CPU lane works where the data already lives: ``steps × cpu_step``;
* the GPU lane copies the data over, works, and copies it back:
  ``copy_in + steps × gpu_step + copy_out``.

The lesson's race (``Race.ticks()``) uses the seed's made-up speeds: 256 numbers,
the CPU does 8 per tick, the GPU all 256 per tick, and each copy takes 40 ticks,
so CPU = 32 × steps and GPU = 40 + steps + 40. ``Race.measured(...)`` builds the
same race from times measured on this machine, in milliseconds.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

CPU, GPU, TIE = "CPU", "GPU", "tie"


@dataclass(frozen=True)
class Lane:
    """Where one lane stands at one moment of the race."""

    state: str  # words a learner reads: "copying to GPU", "step 2 of 3", "done"
    elapsed: float  # time spent so far, capped at the lane's total
    total: float

    @property
    def done(self) -> bool:
        return self.elapsed >= self.total

    @property
    def fraction(self) -> float:
        return 1.0 if self.total <= 0 else min(self.elapsed / self.total, 1.0)


@dataclass(frozen=True)
class Race:
    """The cost of each part of the job, all in one ``unit``."""

    cpu_step: float
    gpu_step: float
    copy_in: float
    copy_out: float
    unit: str = "ticks"
    note: str = ""  # where the speeds came from, shown to the learner
    gpu_assumed: bool = False  # the GPU's speeds are assumed, not measured (no GPU here)

    def __post_init__(self):
        for name in ("cpu_step", "gpu_step", "copy_in", "copy_out"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"Race: {name} must be a finite number >= 0, got {value!r}")
        if self.cpu_step == 0:
            raise ValueError("Race: cpu_step must be more than 0, or the CPU always wins")

    # -- the two ways to build a race ---------------------------------------------------
    @classmethod
    def ticks(
        cls,
        numbers: int = 256,
        cpu_per_tick: int = 8,
        gpu_per_tick: int = 256,
        copy_ticks: int = 40,
    ) -> Race:
        """The seed's race: made-up speeds, real shape."""
        if min(numbers, cpu_per_tick, gpu_per_tick) < 1 or copy_ticks < 0:
            raise ValueError("Race.ticks: counts must be at least 1 and copy_ticks at least 0")
        return cls(
            cpu_step=math.ceil(numbers / cpu_per_tick),
            gpu_step=math.ceil(numbers / gpu_per_tick),
            copy_in=copy_ticks,
            copy_out=copy_ticks,
            unit="ticks",
            note="made-up speeds, real shape",
        )

    @classmethod
    def measured(
        cls,
        cpu_step_ms: float,
        gpu_step_ms: float,
        copy_in_ms: float,
        copy_out_ms: float,
        note: str = "measured on this machine",
        gpu_assumed: bool = False,
    ) -> Race:
        """The same race on times in milliseconds, e.g. from ``gpucourse.measure``.
        ``gpu_assumed``: the GPU's times are assumed (no GPU to measure), and every
        sentence about who wins says so."""
        return cls(
            cpu_step=cpu_step_ms,
            gpu_step=gpu_step_ms,
            copy_in=copy_in_ms,
            copy_out=copy_out_ms,
            unit="ms",
            note=note,
            gpu_assumed=gpu_assumed,
        )

    # -- totals, winner, crossover -------------------------------------------------------
    def cpu_total(self, steps: int) -> float:
        return _check_steps(steps) * self.cpu_step

    def gpu_total(self, steps: int) -> float:
        return self.copy_in + _check_steps(steps) * self.gpu_step + self.copy_out

    def winner(self, steps: int) -> str:
        cpu, gpu = self.cpu_total(steps), self.gpu_total(steps)
        if math.isclose(cpu, gpu, rel_tol=1e-12, abs_tol=1e-12):
            return TIE
        return GPU if gpu < cpu else CPU

    def crossover(self) -> int | None:
        """The fewest steps at which the GPU finishes first; None if it never does.

        GPU < CPU  ⇔  copies < steps × (cpu_step − gpu_step), so the answer is the
        first whole number above copies / (cpu_step − gpu_step).
        """
        saving = self.cpu_step - self.gpu_step
        if saving <= 0:
            return None
        steps = math.floor((self.copy_in + self.copy_out) / saving) + 1
        while steps > 1 and self.winner(steps - 1) == GPU:  # guard float rounding
            steps -= 1
        while self.winner(steps) != GPU:
            steps += 1
        return steps

    def result_line(self, steps: int) -> str:
        """One sentence with both totals and the winner, e.g. for 3 steps:
        "3 steps: CPU 96 ticks, GPU 83 ticks — the GPU wins."."""
        cpu, gpu = self.cpu_total(steps), self.gpu_total(steps)
        winner = self.winner(steps)
        verdict = "a tie" if winner == TIE else f"the {winner} wins"
        assumed = " (the GPU's times assumed, not measured)" if self.gpu_assumed else ""
        return (
            f"{steps_phrase(steps)}: CPU {self.format(cpu)}, GPU {self.format(gpu)} — "
            f"{verdict}{assumed}."
        )

    def rule(self) -> str:
        """How the totals are computed, e.g. "Total ticks: CPU = 32 × steps,
        GPU = 40 + steps + 40"."""

        def n(v):
            return f"{v:.3g}"

        work = "steps" if self.gpu_step == 1 else f"{n(self.gpu_step)} × steps"
        return (
            f"Total {self.unit}: CPU = {n(self.cpu_step)} × steps, "
            f"GPU = {n(self.copy_in)} + {work} + {n(self.copy_out)}"
        )

    def crossover_sentence(self) -> str:
        """Where the GPU starts winning, said as measured or as assumed."""
        cross = self.crossover()
        if self.gpu_assumed:
            return (
                f"With the assumed GPU, the GPU would win from {steps_phrase(cross)} on."
                if cross
                else "Even the assumed GPU never wins at these speeds."
            )
        return (
            f"The GPU wins from {steps_phrase(cross)} on."
            if cross
            else "The GPU never wins at these speeds."
        )

    def format(self, amount: float) -> str:
        if self.unit == "ticks":
            return f"{amount:g} ticks"
        return f"{amount:.3g} {self.unit}"

    # -- the race as it plays ------------------------------------------------------------
    def frame_times(self, steps: int, max_frames: int = 120) -> list[float]:
        """Moments to draw: every tick while that stays under ``max_frames``,
        otherwise ``max_frames`` evenly spaced moments. The last is the finish."""
        longest = max(self.cpu_total(steps), self.gpu_total(steps))
        if max_frames < 1:
            raise ValueError("frame_times: max_frames must be at least 1")
        count = max_frames
        if self.unit == "ticks" and float(longest).is_integer():
            count = min(max_frames, max(int(longest), 1))
        return [longest * i / count for i in range(count + 1)]

    def cpu_lane(self, steps: int, t: float) -> Lane:
        total = self.cpu_total(steps)
        if t >= total:
            return Lane("done", total, total)
        step = min(int(t // self.cpu_step) + 1, steps)
        return Lane(f"step {step} of {steps}", max(t, 0.0), total)

    def gpu_lane(self, steps: int, t: float) -> Lane:
        total = self.gpu_total(steps)
        work_end = self.copy_in + steps * self.gpu_step
        if t >= total:
            state = "done"
        elif t < self.copy_in:
            state = "copying to GPU"
        elif t < work_end:
            step = min(
                int((t - self.copy_in) // self.gpu_step) + 1 if self.gpu_step else steps, steps
            )
            state = f"step {step} of {steps} on the GPU"
        else:
            state = "copying back to CPU"
        return Lane(state, min(max(t, 0.0), total), total)

    def table(self, steps_list) -> list[tuple[int, float, float, str]]:
        """(steps, CPU total, GPU total, winner) for each number of steps."""
        return [(s, self.cpu_total(s), self.gpu_total(s), self.winner(s)) for s in steps_list]


def steps_phrase(steps: int) -> str:
    return f"{steps} step" if steps == 1 else f"{steps} steps"


def _check_steps(steps) -> int:
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"steps must be a whole number of at least 1, got {steps!r}")
    return int(steps)
