"""The race "256 numbers, several steps each" as an ipywidgets widget.

Works on ipywidgets 8.1 (JupyterLab 4) and 7.7.1 (Colab): it uses only widgets,
traits and methods both have, and text labels rather than icons.

The kernel stays free while a race plays: Run starts an asyncio task on the
kernel's running event loop and is disabled until the last frame. Without a
running loop (a script, a test) Run plays every frame at once. Tests can also
``await widget.play(0)`` or call ``widget.play_now()``.

Stable CSS classes, for browser tests and styling:

=================  ==========================================================
``race``           the whole widget
``race-mode``      the speeds toggle (only when measured speeds are given)
``race-steps``     the "Steps" slider
``race-run``       the "Run" button
``race-lane-cpu``  the CPU lane (orange #E69F00, labelled "CPU")
``race-lane-gpu``  the GPU lane (blue #0072B2, labelled "GPU")
``race-result``    the status line: both totals and the winner
``race-rule``      how the totals are computed, and where the speeds came from
=================  ==========================================================

The Steps slider is named for screen readers after its label (``widget_access``).
"""

from __future__ import annotations

import asyncio
from html import escape

import ipywidgets as widgets

from .figures import CPU_COLOUR, GPU_COLOUR, race_fallback_html
from .lesson_widget import LessonWidget
from .race import Race, steps_phrase
from .widget_access import NAME_SLIDERS_JS, named, slider_namer  # noqa: F401 (re-exported)

SECONDS_PER_FRAME = 1 / 30
MAX_FRAMES = 120  # about 4 s for the longest race

_STRIPES = f"repeating-linear-gradient(45deg, {GPU_COLOUR} 0 5px, #a9cfe8 5px 10px)"


class RaceWidget(LessonWidget):
    """The race with a Steps slider, a Run button, two lanes and a status line.

    ``measured`` (a :class:`Race` from ``StepTimes.race()``) adds a toggle between
    the seed's made-up ticks and speeds measured on this machine. The Steps slider
    redraws as it moves (``continuous_update``): a frame costs a fraction of a ms.
    """

    css = "race"

    def __init__(
        self,
        race: Race | None = None,
        measured: Race | None = None,
        steps: int = 1,
        max_steps: int = 64,
        seconds_per_frame: float = SECONDS_PER_FRAME,
    ):
        self.races = {"ticks": race or Race.ticks()}
        if measured is not None:
            self.races["measured"] = measured
        self.race = self.races["ticks"]
        self.seconds_per_frame = seconds_per_frame
        self.revealed = False  # the seed asks for a prediction before the first result

        self.steps = named(
            widgets.IntSlider(
                value=steps, min=1, max=max_steps, description="Steps", continuous_update=True
            )
        )
        self.run = widgets.Button(description="Run", button_style="primary")
        self.cpu = widgets.HTML()
        self.gpu = widgets.HTML()
        self.status = widgets.HTML()
        self.rule = widgets.HTML()
        self.mode = widgets.ToggleButtons(
            options=[("made-up ticks", "ticks"), ("measured speeds", "measured")],
            description="Speeds",
        )
        self._name_sliders = slider_namer()

        controls = [self.mode] if measured is not None else []
        controls.append(widgets.HBox([self.steps, self.run]))
        self.view = widgets.VBox(
            controls + [self.cpu, self.gpu, self.status, self.rule, self._name_sliders]
        )
        self._name_parts(
            {
                "mode": self.mode,
                "steps": self.steps,
                "run": self.run,
                "lane-cpu": self.cpu,
                "lane-gpu": self.gpu,
                "result": self.status,
                "rule": self.rule,
            }
        )

        self.steps.observe(self._on_steps, names="value")
        self.mode.observe(self._on_mode, names="value")
        self.run.on_click(self._on_run)
        self._set_status("Press Run.")
        self._draw_rule()
        self._draw_start()

    # -- playing ------------------------------------------------------------------------
    async def play(self, seconds_per_frame: float | None = None) -> None:
        """Animate one race at the slider's steps, then show the result."""
        pause = self.seconds_per_frame if seconds_per_frame is None else seconds_per_frame
        steps = self.steps.value
        self.run.disabled = True
        try:
            self._set_status(f"{steps_phrase(steps)}: racing…")
            for t in self.race.frame_times(steps, MAX_FRAMES):
                self._draw(steps, t)
                await asyncio.sleep(pause)
            self._finish(steps)
        finally:
            self.run.disabled = False

    def play_now(self) -> None:
        """Every frame at once, with no pauses: for scripts, tests and benchmarks."""
        steps = self.steps.value
        self.run.disabled = True
        try:
            for t in self.race.frame_times(steps, MAX_FRAMES):
                self._draw(steps, t)
            self._finish(steps)
        finally:
            self.run.disabled = False

    def _finish(self, steps: int) -> None:
        self.revealed = True
        self._draw(steps, max(self.race.cpu_total(steps), self.race.gpu_total(steps)))
        self._set_status(self.race.result_line(steps))

    # -- reacting to the controls -------------------------------------------------------
    def _on_steps(self, change) -> None:
        self._cancel()
        steps = change["new"]
        if self.revealed:
            self._finish(steps)
        else:
            self._draw_start()
            self._set_status(f"{steps_phrase(steps)}: predict the winner, then press Run.")

    def _on_mode(self, change) -> None:
        self._cancel()
        self.race = self.races[change["new"]]
        self._draw_rule()
        if self.revealed:
            self._finish(self.steps.value)
        else:
            self._draw_start()

    # -- drawing ---------------------------------------------------------------------------
    def _draw_start(self) -> None:
        self._draw(self.steps.value, 0.0, started=False)

    def _draw_rule(self) -> None:
        where = ""
        if self.race.unit != "ticks":  # the tick race leaves the crossover to the learner
            where = " " + self.race.crossover_sentence()
        self.rule.value = (
            f"<small>{escape(self.race.note[:1].upper() + self.race.note[1:])}. "
            f"{escape(self.race.rule())}.{escape(where)}</small>"
        )

    def _draw(self, steps: int, t: float, started: bool = True) -> None:
        race = self.race
        scale = max(race.cpu_total(steps), race.gpu_total(steps))
        cpu, gpu = race.cpu_lane(steps, t), race.gpu_lane(steps, t)
        cpu_state = cpu.state if started else "waiting"
        gpu_state = gpu.state if started else "waiting"
        self.cpu.value = _lane_html(
            "CPU", cpu_state, race.format(cpu.elapsed), [(0, cpu.total, CPU_COLOUR)], t, scale
        )
        work_end = race.copy_in + steps * race.gpu_step
        segments = [
            (0, race.copy_in, _STRIPES),
            (race.copy_in, work_end, GPU_COLOUR),
            (work_end, gpu.total, _STRIPES),
        ]
        self.gpu.value = _lane_html("GPU", gpu_state, race.format(gpu.elapsed), segments, t, scale)

    # -- display ---------------------------------------------------------------------------
    def _plain_text(self) -> str:
        return (
            f"RaceWidget: the copy-versus-compute race, {steps_phrase(self.steps.value)};"
            " it plays in a running notebook."
        )

    def _fallback_html(self) -> str:
        """The race's rules with its table and chart folded away: a saved notebook must
        not answer the prediction."""
        return race_fallback_html(self.races["ticks"])


def _lane_html(name: str, state: str, elapsed: str, segments, t: float, scale: float) -> str:
    """One lane: its name in words, a bar on a time axis shared by both lanes, and
    its state in words."""
    bars = []
    for start, end, fill in segments:
        shown = min(max(t - start, 0.0), end - start)
        if shown > 0 and scale > 0:
            bars.append(
                f'<div style="width:{100 * shown / scale:.2f}%;background:{fill};'
                f'height:100%"></div>'
            )
    return (
        '<div style="display:flex;align-items:center;gap:10px;font-family:sans-serif;'
        'line-height:1.4">'
        f'<b style="width:2.5em">{name}</b>'
        '<div style="flex:0 0 340px;height:18px;border:1px solid #555;display:flex;'
        f'background:#f4f4f4">{"".join(bars)}</div>'
        f"<span>{escape(state)} · {escape(elapsed)}</span></div>"
    )
