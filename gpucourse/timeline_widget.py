"""A profiler trace's timeline as an ipywidgets widget: ``TimelineWidget``.

The trace is read by ``gpucourse.trace_timeline``; this module only draws it and steps
through it. Works on ipywidgets 8.1 (JupyterLab 4) and 7.7.1 (Colab): core widgets only
(drop-downs, a slider, buttons with text labels, HTML), the timeline as SVG.

Keyboard: every control is reached with Tab. *Previous event* and *Next event* move through
the events of the chosen lane in the chosen step, in time order; *Longest gap* jumps to the
event that ends that lane's longest idle gap. The status line (``role="status"``) names the
chosen event in words, so a screen reader reads each one out.

Stable CSS classes, for browser tests and styling:

=======================  ========================================================
``trace``                the whole widget
``trace-step``           the "Step" drop-down
``trace-lane``           the "Lane" drop-down
``trace-zoom``           the "Zoom" slider
``trace-previous``       the "Previous event" button
``trace-next``           the "Next event" button
``trace-gap``            the "Longest gap" button
``trace-timeline``       the lanes (SVG)
``trace-result``         the status line: the chosen event, in words
``trace-summary``        each lane's busy time, busy share and longest gap
=======================  ========================================================
"""

from __future__ import annotations

from html import escape

import ipywidgets as widgets

from .figures import lane_summary_html, trace_fallback_html, trace_timeline_svg
from .lesson_widget import LessonWidget
from .trace_timeline import RANGES, WORK, Event, describe, lane_summary, lanes, steps
from .widget_access import named, slider_namer

ALL = "all"
MAX_ZOOM = 16


def _look(width: str = "460px") -> dict:
    return {"style": {"description_width": "120px"}, "layout": widgets.Layout(width=width)}


class TimelineWidget(LessonWidget):
    """The lanes of ``events`` (from ``trace_timeline.events_from_profiler``), one step at
    a time, with a keyboard walk through the events and each lane's busy share."""

    css = "trace"

    def __init__(self, events: list[Event], title: str = ""):
        self.events = sorted(
            (e for e in events if e.cat in WORK | RANGES), key=lambda e: (e.start_us, -e.dur_us)
        )
        if not self.events:
            raise ValueError("TimelineWidget: the trace has no events to draw")
        self.title = title
        self.steps = steps(self.events)
        self.lanes = lanes(self.events)
        self.index = 0

        step_options = [("all recorded steps", ALL)] + [
            (f"step {s.number} ({s.dur_us / 1e3:.3g} ms)", s.number) for s in self.steps
        ]
        self.step = widgets.Dropdown(
            options=step_options,
            value=self.steps[0].number if self.steps else ALL,
            description="Step",
            **_look(),
        )
        self.lane = widgets.Dropdown(
            options=[("every lane", ALL)] + [(lane, lane) for lane in self.lanes],
            value=ALL,
            description="Lane",
            **_look(),
        )
        self.zoom = named(
            widgets.IntSlider(
                value=1, min=1, max=MAX_ZOOM, description="Zoom", continuous_update=False, **_look()
            )
        )
        self.previous = widgets.Button(description="Previous event")
        self.next = widgets.Button(description="Next event")
        self.gap = widgets.Button(description="Longest gap")
        self.run = self.next  # the primary button, in the vocabulary LessonWidget shares
        self.timeline = widgets.HTML()
        self.status = widgets.HTML()
        self.summary = widgets.HTML()
        heading = [widgets.HTML(f"<b>{escape(title)}</b>")] if title else []
        self.view = widgets.VBox(
            heading
            + [
                self.step,
                self.lane,
                self.zoom,
                widgets.HBox([self.previous, self.next, self.gap]),
                self.status,
                self.timeline,
                self.summary,
                slider_namer(),
            ]
        )
        self._name_parts(
            {
                "step": self.step,
                "lane": self.lane,
                "zoom": self.zoom,
                "previous": self.previous,
                "next": self.next,
                "gap": self.gap,
                "timeline": self.timeline,
                "result": self.status,
                "summary": self.summary,
            }
        )
        self.step.observe(self._on_window, names="value")
        self.lane.observe(self._on_window, names="value")
        self.zoom.observe(self._on_zoom, names="value")
        self.previous.on_click(lambda _b: self.move(-1))
        self.next.on_click(lambda _b: self.move(+1))
        self.gap.on_click(lambda _b: self.to_longest_gap())
        self._redraw()

    # -- what tests and the notebook read ------------------------------------------------
    def window(self) -> tuple[float, float]:
        """The chosen step's start and end (µs); all recorded steps, or the whole trace."""
        if self.step.value == ALL:
            chosen = self.steps or None
            if chosen is None:
                return min(e.start_us for e in self.events), max(e.end_us for e in self.events)
            return chosen[0].start_us, chosen[-1].end_us
        step = next(s for s in self.steps if s.number == self.step.value)
        return step.start_us, step.end_us

    def walk(self) -> list[Event]:
        """The events the buttons step through: the chosen lane's, in the window, in order."""
        start, end = self.window()
        return [
            e
            for e in self.events
            if e.end_us > start
            and e.start_us < end
            and (self.lane.value == ALL or e.lane == self.lane.value)
        ]

    @property
    def current(self) -> Event | None:
        walk = self.walk()
        return walk[min(self.index, len(walk) - 1)] if walk else None

    def summaries(self):
        start, end = self.window()
        return lane_summary(self.events, start, end)

    def view_range(self) -> tuple[float, float]:
        """The drawn stretch of time: the window, divided by the zoom, around the event."""
        start, end = self.window()
        width = (end - start) / self.zoom.value
        if self.zoom.value == 1 or self.current is None:
            return start, end
        middle = (self.current.start_us + self.current.end_us) / 2
        left = min(max(middle - width / 2, start), end - width)
        return left, left + width

    # -- the keyboard walk -----------------------------------------------------------------
    def move(self, by: int) -> None:
        walk = self.walk()
        if walk:
            self.index = min(max(self.index + by, 0), len(walk) - 1)
        self._redraw()

    def to_longest_gap(self) -> None:
        """Choose the first event after the longest gap of the chosen lane (or, for every
        lane, of the lane whose gap is longest), and say where the gap is."""
        summaries = [
            s for s in self.summaries() if self.lane.value == ALL or s.lane == self.lane.value
        ]
        if not summaries:
            return
        longest = max(summaries, key=lambda s: s.gap_us)
        walk = self.walk()
        after = [
            i
            for i, e in enumerate(walk)
            if e.lane == longest.lane and e.cat in WORK and e.start_us >= longest.gap_end_us
        ]
        if after:
            self.index = after[0]
        self._redraw(
            f"Longest gap on {longest.lane}: {longest.gap_us / 1e3:.3f} ms, from "
            f"{longest.gap_start_us / 1e3:.3f} to {longest.gap_end_us / 1e3:.3f} ms. "
        )

    # -- drawing -------------------------------------------------------------------------------
    def _on_window(self, _change) -> None:
        self.index = 0
        self._redraw()

    def _on_zoom(self, _change) -> None:
        self._redraw()

    def _redraw(self, prefix: str = "") -> None:
        walk, current = self.walk(), self.current
        if current is None:
            self._set_status(prefix + "No event here: choose another step or lane.")
        else:
            self._set_status(
                f"{prefix}Event {min(self.index, len(walk) - 1) + 1} of {len(walk)}: "
                f"{describe(current)}."
            )
        start, end = self.view_range()
        self.timeline.value = trace_timeline_svg(
            self.events, start, end, current=current, lanes=self.lanes
        )
        self.summary.value = lane_summary_html(self.summaries())

    # -- display ----------------------------------------------------------------------------------
    def _plain_text(self) -> str:
        return "TimelineWidget: your profiler trace as lanes; it runs in a running notebook."

    def _fallback_html(self) -> str:
        return trace_fallback_html()

    async def play(self) -> None:  # nothing plays: the buttons step through the trace
        self.play_now()

    def play_now(self) -> None:
        self.move(+1)
