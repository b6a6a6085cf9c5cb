"""Train a small network live, as an ipywidgets widget: ``TrainingWidget``.

The training itself is ``gpucourse.training.Trainer``; this module only draws it. Works on
ipywidgets 8.1 (JupyterLab 4) and 7.7.1 (Colab): core widgets only, text labels on the
buttons, the loss curve as SVG in an HTML widget (no plotting back end to configure).

The kernel stays free while it trains: Train starts an asyncio task on the kernel's
running event loop, which runs steps for about ``chunk_seconds``, redraws, and yields, so
Stop and the sliders are handled between chunks. A slider moved while training applies
from the next step, and starts a new row of measured speeds. Without a running loop (a
script, a test) Train runs every step at once; tests can also ``await widget.play()`` or
call ``widget.play_now()``. The vocabulary (``run``, ``stop``, ``status``, ``playing``) is
``gpucourse.lesson_widget``'s, shared by every widget of the course.

Stable CSS classes, for browser tests and styling:

=======================  ====================================================
``training``             the whole widget
``training-read-every``  the slider "Read the loss every N steps"
``training-batch``       the slider "Batch size"
``training-train``       the "Train" button
``training-stop``        the "Stop" button
``training-status``      the live line: step, measured steps/s and samples/s
``training-curve``       the loss curve (SVG)
``training-speeds``      the measured speeds, one row per setting
``training-mode``        "measured here" or "modelled GPU (made-up times)"
``training-modelled``    the modelled GPU's speeds for the sliders' setting
=======================  ====================================================

The modelled-GPU mode is ``gpucourse.training.GpuModel``, plain arithmetic on made-up
times, for a learner without a GPU to see what a read costs on one. It is labelled as a
model wherever it is shown and never mixed with a measured figure.

Both sliders are named for screen readers after their labels (``widget_access``).
"""

from __future__ import annotations

import asyncio
from html import escape

import ipywidgets as widgets

from .figures import CPU_COLOUR, GPU_COLOUR, loss_curve_svg, training_fallback_html
from .lesson_widget import LessonWidget
from .training import GpuModel, Trainer, make_network, parameter_count
from .widget_access import named, slider_namer

BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
MAX_STEPS = 3000
CHUNK_SECONDS = 0.1
SPEED_ROWS = 6  # the most recent settings shown in the table


def _slider_look() -> dict:
    """Both sliders one under the other, labels in one column, tracks long enough to aim at."""
    return {"style": {"description_width": "210px"}, "layout": widgets.Layout(width="520px")}


class TrainingWidget(LessonWidget):
    """Read-every and batch-size sliders, Train and Stop, a live status line, the loss
    curve and a table of measured speeds. Each press of Train trains a fresh network (the
    same seed) for up to ``max_steps`` steps on ``device``. The sliders act when let go:
    a change restarts the measured speeds."""

    css = "training"

    def __init__(
        self,
        device: str = "cpu",
        read_every: int = 10,
        batch_size: int = 64,
        max_steps: int = MAX_STEPS,
        chunk_seconds: float = CHUNK_SECONDS,
        seed: int = 0,
        gpu_model: GpuModel | None = None,
    ):
        if batch_size not in BATCH_SIZES:
            raise ValueError(f"batch_size must be one of {BATCH_SIZES}, got {batch_size!r}")
        self.device, self.max_steps, self.seed = str(device), max_steps, seed
        self.chunk_seconds = chunk_seconds
        self.gpu_model = gpu_model or GpuModel()
        self.trainer: Trainer | None = None
        self.rows: list = []  # measured segments of finished runs, then the current run's
        self._stop_asked = False

        self.read_every = named(
            widgets.IntSlider(
                value=read_every,
                min=1,
                max=100,
                description="Read the loss every N steps",
                continuous_update=False,
                **_slider_look(),
            )
        )
        self.batch = named(
            widgets.SelectionSlider(
                options=list(BATCH_SIZES),
                value=batch_size,
                description="Batch size",
                continuous_update=False,
                **_slider_look(),
            )
        )
        self.run = widgets.Button(description="Train", button_style="primary")
        self.stop = widgets.Button(description="Stop", disabled=True)
        self.status = widgets.HTML()
        self.curve = widgets.HTML()
        self.speeds = widgets.HTML()
        self.mode = widgets.ToggleButtons(
            options=[
                (f"measured here ({self.device})", "measured"),
                ("modelled GPU (made-up times)", "modelled"),
            ],
            value="measured",
            description="Speeds",
            style={"button_width": "220px"},
        )
        self.modelled = widgets.HTML()
        self.view = widgets.VBox(
            [
                self.read_every,
                self.batch,
                widgets.HBox([self.run, self.stop]),
                self.status,
                self.curve,
                self.mode,
                self.speeds,
                self.modelled,
                slider_namer(),
            ]
        )
        self._name_parts(
            {
                "read-every": self.read_every,
                "batch": self.batch,
                "train": self.run,
                "stop": self.stop,
                "status": self.status,
                "curve": self.curve,
                "speeds": self.speeds,
                "mode": self.mode,
                "modelled": self.modelled,
            }
        )

        self.read_every.observe(self._on_read_every, names="value")
        self.batch.observe(self._on_batch, names="value")
        self.mode.observe(self._on_mode, names="value")
        self.run.on_click(self._on_run)
        self.stop.on_click(self._on_stop)
        self._set_status(self._ready_text())
        self._draw()
        self._draw_modelled()

    # -- what tests and the notebook read ---------------------------------------------
    @property
    def modelled_text(self) -> str:
        """The modelled GPU's speeds for the sliders' setting ("" in the measured mode)."""
        if self.mode.value != "modelled":
            return ""
        return self.gpu_model.sentence(self.read_every.value, self.batch.value)

    # -- training -----------------------------------------------------------------------
    async def play(self, pause: float = 0.01) -> None:
        """Train a fresh network until Stop or ``max_steps``, redrawing after each chunk."""
        self._start()
        try:
            while not self._stop_asked and self.trainer.step < self.max_steps:
                self.trainer.run(
                    steps=self.max_steps - self.trainer.step, seconds=self.chunk_seconds
                )
                self._draw()
                await asyncio.sleep(pause)  # Stop and the sliders are handled here
        finally:
            self._finish()

    def play_now(self, steps: int | None = None) -> None:
        """Train a fresh network for ``steps`` steps (default ``max_steps``) at once, with
        no pauses: for scripts, tests and benchmarks."""
        self._start()
        try:
            self.trainer.run(steps=min(steps or self.max_steps, self.max_steps))
        finally:
            self._finish()

    def _start(self) -> None:
        if self.trainer is not None:
            self.rows += self.trainer.finished_segments()
        self.trainer = Trainer(
            device=self.device,
            batch_size=self.batch.value,
            read_every=self.read_every.value,
            seed=self.seed,
        )
        self._started()

    def _started(self) -> None:  # Stop works from the moment Train is pressed
        self.run.disabled, self.stop.disabled = True, False

    def _finish(self) -> None:
        self.run.disabled, self.stop.disabled = False, True
        how = "stopped" if self._stop_asked else "done"
        self._stop_asked = False  # kept until now: a Stop pressed before the task began counts
        self._draw(ending=how)

    def _on_stop(self, _button=None) -> None:
        self._stop_asked = True  # the task ends after its current chunk

    def _on_read_every(self, change) -> None:
        self._draw_modelled()
        if self.trainer is not None and self.playing:
            self.trainer.set_read_every(change["new"])
            self._draw()
        else:
            self._set_status(self._ready_text())

    def _on_batch(self, change) -> None:
        self._draw_modelled()
        if self.trainer is not None and self.playing:
            self.trainer.set_batch_size(change["new"])
            self._draw()
        else:
            self._set_status(self._ready_text())

    def _on_mode(self, _change) -> None:
        self._draw_modelled()

    def _draw_modelled(self) -> None:
        """The modelled mode hides the measured table and shows the model; the measured mode
        the reverse, so that no line mixes the two."""
        modelled = self.mode.value == "modelled"
        self.speeds.layout.display = "none" if modelled else None
        self.modelled.layout.display = None if modelled else "none"
        self.modelled.value = (
            f'<div role="status"><b>Modelled, not measured:</b> {escape(self.modelled_text)}</div>'
            if modelled
            else ""
        )

    def _ready_text(self) -> str:
        """What Train will do, said back when a slider moves: the settings as the kernel has them."""
        every = self.read_every.value
        return (
            f"Press Train to train on {self.device}, reading the loss every "
            f"{'step' if every == 1 else f'{every} steps'}, in batches of {self.batch.value}."
        )

    # -- drawing --------------------------------------------------------------------------
    def _draw(self, ending: str | None = None) -> None:
        trainer = self.trainer
        colour = GPU_COLOUR if self.device.startswith("cuda") else CPU_COLOUR
        if trainer is None:
            self.curve.value = loss_curve_svg([], device=self.device, colour=colour)
            self.speeds.value = ""
            return
        points = [(r.step, r.loss) for r in trainer.readings]
        self.curve.value = loss_curve_svg(points, trainer.step, colour, self.device)
        segment = trainer.segment
        reads = sum(s.reads for s in trainer.segments)
        if segment.steps:
            speed = (
                f"measured: {segment.steps_per_s:,.0f} steps/s, "
                f"{segment.samples_per_s:,.0f} samples/s"
            )
        else:
            speed = "measuring…"
        state = f"{ending}: " if ending else "training: "
        self._set_status(
            f"{state}step {trainer.step:,} of {self.max_steps:,} on {self.device} · "
            f"{speed} · the loss read {reads:,} times so far"
        )
        self.speeds.value = _speeds_html((self.rows + trainer.finished_segments())[-SPEED_ROWS:])

    # -- display --------------------------------------------------------------------------
    def _plain_text(self) -> str:
        return "TrainingWidget: trains a small network live in a running notebook."

    def _fallback_html(self) -> str:
        """What it does and the question, with no measured figure: a saved notebook's
        speeds would be one machine's."""
        return training_fallback_html(parameter_count(make_network()))


def _speeds_html(segments) -> str:
    if not segments:
        return ""
    rows = "".join(
        f"<tr><td>{escape(s.device)}</td><td>{s.read_every}</td><td>{s.batch_size}</td>"
        f"<td>{s.steps:,}</td><td>{s.steps_per_s:,.0f}</td><td>{s.samples_per_s:,.0f}</td></tr>"
        for s in segments
    )
    return (
        '<table class="training-speeds-table"><caption>Measured on this machine, one row '
        "per setting</caption><thead><tr><th>device</th><th>read the loss every</th>"
        "<th>batch</th><th>steps</th><th>steps/s</th><th>samples/s</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
