"""The input pipeline's timeline as an ipywidgets widget: ``PipelineWidget``.

The arithmetic is ``gpucourse.input_pipeline``; this module only draws it. Works on
ipywidgets 8.1 (JupyterLab 4) and 7.7.1 (Colab): core widgets only (a slider, check boxes,
toggle buttons, a button and HTML), text labels rather than icons, the timeline as SVG.

The kernel stays free while the timeline plays: Run starts an asyncio task on the
kernel's running event loop and is disabled until the last frame. Without a running
loop (a script, a test) Run draws the last frame at once. Tests can also
``await widget.play(0)`` or call ``widget.play_now()``.

Stable CSS classes, for browser tests and styling:

=====================  ==========================================================
``pipeline``           the whole widget
``pipeline-speeds``    "assumed speeds" or "measured on this machine" (when measured speeds are given)
``pipeline-workers``   the "Loader workers" slider
``pipeline-pinned``    the "Pinned memory" check box
``pipeline-stream``    the "Copy on a side stream" check box
``pipeline-dtype``     "Copied as": uint8 or float32
``pipeline-run``       the "Run" button
``pipeline-timeline``  the lanes (SVG)
``pipeline-result``    time per batch, bottleneck, the GPU's busy share
``pipeline-rule``      each stage's time and where it came from
=====================  ==========================================================
"""

from __future__ import annotations

import asyncio
from html import escape

import ipywidgets as widgets

from .figures import pipeline_fallback_html, pipeline_timeline_svg
from .input_pipeline import Pipeline, Settings, Speeds, assumed_speeds
from .lesson_widget import LessonWidget
from .widget_access import named, slider_namer

BATCHES = 8
FRAMES = 60
SECONDS_PER_FRAME = 1 / 30
MAX_WORKERS = 4


def _look() -> dict:
    return {"style": {"description_width": "170px"}, "layout": widgets.Layout(width="460px")}


class PipelineWidget(LessonWidget):
    """Settings on the left of a pipeline, its timeline and its steady state on the right.
    ``measured`` (a :class:`Speeds` from ``image_batches.measure_speeds``) adds a toggle
    between the made-up speeds and this machine's. The workers slider redraws when it is
    let go (a redraw computes the whole timeline)."""

    css = "pipeline"

    def __init__(
        self,
        measured: Speeds | None = None,
        settings: Settings | None = None,
        seconds_per_frame: float = SECONDS_PER_FRAME,
    ):
        settings = settings or Settings()
        self.speeds = {"assumed": assumed_speeds()}
        if measured is not None:
            self.speeds["measured"] = measured
        self.seconds_per_frame = seconds_per_frame
        self.revealed = False  # the lesson asks for a prediction before the first result

        self.mode = widgets.ToggleButtons(
            options=[("assumed speeds", "assumed"), ("measured on this machine", "measured")],
            description="Speeds",
            style={"button_width": "190px"},
        )
        self.workers = named(
            widgets.IntSlider(
                value=settings.workers,
                min=0,
                max=MAX_WORKERS,
                description="Loader workers",
                continuous_update=False,
                **_look(),
            )
        )
        self.pinned = widgets.Checkbox(
            value=settings.pinned, description="Pinned memory", **_look()
        )
        self.side_stream = widgets.Checkbox(
            value=settings.side_stream, description="Copy on a side stream", **_look()
        )
        self.dtype = widgets.ToggleButtons(
            options=["uint8", "float32"], value=settings.dtype, description="Copied as"
        )
        self.run = widgets.Button(description="Run", button_style="primary")
        self.timeline = widgets.HTML()
        self.status = widgets.HTML()
        self.rule = widgets.HTML()
        controls = [self.mode] if measured is not None else []
        controls += [self.workers, self.pinned, self.side_stream, self.dtype, self.run]
        self.view = widgets.VBox(controls + [self.timeline, self.status, self.rule, slider_namer()])
        self._name_parts(
            {
                "speeds": self.mode,
                "workers": self.workers,
                "pinned": self.pinned,
                "stream": self.side_stream,
                "dtype": self.dtype,
                "run": self.run,
                "timeline": self.timeline,
                "result": self.status,
                "rule": self.rule,
            }
        )

        for control in (self.mode, self.workers, self.pinned, self.side_stream, self.dtype):
            control.observe(self._on_change, names="value")
        self.run.on_click(self._on_run)
        self._redraw()

    # -- what tests and the notebook read ------------------------------------------------
    @property
    def pipeline(self) -> Pipeline:
        return Pipeline(self.speeds[self.mode.value], self.settings)

    @property
    def settings(self) -> Settings:
        return Settings(
            workers=self.workers.value,
            pinned=self.pinned.value,
            side_stream=self.side_stream.value,
            dtype=self.dtype.value,
        )

    # -- playing ----------------------------------------------------------------------------
    async def play(self, seconds_per_frame: float | None = None) -> None:
        """Draw the batches going through, frame by frame, then show the steady state."""
        pause = self.seconds_per_frame if seconds_per_frame is None else seconds_per_frame
        pipeline = self.pipeline
        end = max(span.end for span in pipeline.spans(BATCHES))
        self.run.disabled = True
        try:
            self._set_status("running…")
            for frame in range(FRAMES + 1):
                self.timeline.value = pipeline_timeline_svg(pipeline, BATCHES, end * frame / FRAMES)
                await asyncio.sleep(pause)
            self._finish()
        finally:
            self.run.disabled = False

    def play_now(self) -> None:
        """The last frame at once: for scripts, tests and benchmarks."""
        self._finish()

    def _finish(self) -> None:
        self.revealed = True
        self._redraw()

    def _on_change(self, _change) -> None:
        self._cancel()
        self._redraw()

    # -- drawing ------------------------------------------------------------------------------
    def _redraw(self) -> None:
        pipeline = self.pipeline
        self.rule.value = _rule_html(pipeline)
        if not self.revealed:
            self.timeline.value = pipeline_timeline_svg(pipeline, BATCHES, until=0.0)
            self._set_status(
                f"{_settings_words(pipeline.settings)}: predict the time per batch "
                "and the bottleneck, then press Run."
            )
            return
        self.timeline.value = pipeline_timeline_svg(pipeline, BATCHES)
        end = max(span.end for span in pipeline.spans(BATCHES))
        self._set_status(
            f"{BATCHES} batches in {end:.3g} ms · {pipeline.summary()} ({pipeline.speeds.name})."
        )

    # -- display --------------------------------------------------------------------------------
    def _plain_text(self) -> str:
        return "PipelineWidget: the input pipeline's timeline; it runs in a running notebook."

    def _fallback_html(self) -> str:
        """What it shows and the question, with the answers folded away: a saved notebook
        must not answer the prediction."""
        speeds = assumed_speeds()
        cases = [
            ("0 workers, pageable, float32 (the defaults)", Settings()),
            ("2 workers, pageable, float32", Settings(workers=2)),
            (
                "4 workers, pinned, side stream, float32",
                Settings(workers=4, pinned=True, side_stream=True),
            ),
            (
                "2 workers, pinned, side stream, uint8",
                Settings(workers=2, pinned=True, side_stream=True, dtype="uint8"),
            ),
            (
                "3 workers, pinned, side stream, uint8",
                Settings(workers=3, pinned=True, side_stream=True, dtype="uint8"),
            ),
        ]
        pipelines = [(label, Pipeline(speeds, s)) for label, s in cases]
        return pipeline_fallback_html(pipelines, pipelines[-1][1])


def _settings_words(settings: Settings) -> str:
    workers = {0: "no workers (the main process loads)", 1: "1 worker"}.get(
        settings.workers, f"{settings.workers} workers"
    )
    memory = "pinned" if settings.pinned else "pageable"
    stream = "a side stream" if settings.side_stream else "one stream"
    return f"{workers}, {memory} memory, {stream}, copied as {settings.dtype}"


def _rule_html(pipeline: Pipeline) -> str:
    """Each stage's time for one batch and where it came from, in words."""
    speeds, settings = pipeline.speeds, pipeline.settings
    load_words = speeds.said("load") + (
        f"; plus {speeds.said('normalize')}" if settings.dtype == "float32" else ""
    )
    cores = (
        f" This machine has {speeds.cores} CPU core{'s' * (speeds.cores != 1)}: more workers "
        "share them."
        if speeds.cores
        else ""
    )
    lines = [
        f"load: {pipeline.load_ms():.3g} ms a batch of {speeds.batch} for one worker "
        f"({load_words}).{cores}",
        f"copy: {pipeline.copy_ms():.3g} ms for {pipeline.batch_bytes() / 1e6:.3g} MB, a batch of "
        f"{speeds.batch} as {settings.dtype}, from {'pinned' if settings.pinned else 'pageable'} memory "
        f"({speeds.said('copy')}).",
        f"compute: {pipeline.compute_ms():.3g} ms ({speeds.said('compute')}).",
        "No workers means the main process loads each batch and every stage waits for the one "
        "before: one after another, as in a loop that waits for the GPU at every step (it reads "
        "the loss, say). The copy overlaps the step only from pinned memory on a "
        "side stream. Left out: pinning itself (a copy on the CPU), and converting a uint8 "
        "batch on the GPU.",
    ]
    return "<small>" + "<br>".join(escape(line) for line in lines) + "</small>"
