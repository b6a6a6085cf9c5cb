"""The trace timeline widget, driven from Python as a front end would drive it."""

from __future__ import annotations

import re

import pytest

from gpucourse.timeline_widget import MAX_ZOOM, TimelineWidget
from gpucourse.trace_timeline import Event
from gpucourse.widget_access import SLIDER_CLASS

CPU, GPU = "CPU thread 1", "GPU 0 stream 7"


def trace():
    """Two steps of 10 ms: on the CPU a step range, a forward range and two operators; on
    the GPU two overlapping kernels in step 1 and one in step 2."""
    return [
        Event(CPU, "ProfilerStep#1", 0, 10_000, "user_annotation"),
        Event(CPU, "forward", 0, 6_000, "user_annotation"),
        Event(CPU, "aten::linear", 1_000, 3_000, "cpu_op"),
        Event(CPU, "aten::addmm", 2_000, 1_000, "cpu_op"),
        Event(CPU, "cudaStreamSynchronize", 5_000, 4_000, "cuda_runtime"),
        Event(GPU, "gemm", 2_000, 3_000, "kernel"),
        Event(GPU, "relu", 4_000, 2_000, "kernel"),
        Event(CPU, "ProfilerStep#2", 10_000, 10_000, "user_annotation"),
        Event(CPU, "aten::mm", 11_000, 1_000, "cpu_op"),
        Event(GPU, "Memcpy HtoD (Pageable -> Device)", 12_000, 1_000, "gpu_memcpy"),
        Event(CPU, "aten::mm", 30_000, 1_000, "python_function"),  # not work, not a range
    ]


def test_every_control_is_named_in_words_and_the_first_step_is_shown():
    widget = TimelineWidget(trace())
    assert widget.step.description == "Step" and widget.step.value == 1
    assert [label for label, _ in widget.step.options] == [
        "all recorded steps",
        "step 1 (10 ms)",
        "step 2 (10 ms)",
    ]
    assert widget.lane.description == "Lane"
    assert [value for _, value in widget.lane.options] == ["all", CPU, GPU]
    assert widget.zoom.description == "Zoom" and (widget.zoom.min, widget.zoom.max) == (1, MAX_ZOOM)
    assert SLIDER_CLASS in widget.zoom._dom_classes
    assert [b.description for b in (widget.previous, widget.next, widget.gap)] == [
        "Previous event",
        "Next event",
        "Longest gap",
    ]
    assert widget.status_text == (
        "Event 1 of 7: ProfilerStep#1: the profiler's step 1, on CPU thread 1, "
        "from 0.000 ms for 10.000 ms."
    )
    assert 'role="status"' in widget.status.value
    svg = widget.timeline.value
    for row in (">CPU thread 1: ranges<", ">CPU thread 1<", ">GPU 0 stream 7<"):
        assert row in svg
    assert "aria-label=" in svg and "The outlined event: ProfilerStep#1." in svg


def test_the_keyboard_walk_names_each_event_and_stops_at_the_ends():
    widget = TimelineWidget(trace())
    widget.previous.click()
    assert widget.status_text.startswith("Event 1 of 7: ProfilerStep#1")
    seen = []
    for _ in range(8):
        widget.next.click()
        seen.append(widget.current.name)
    assert seen == [
        "forward",
        "aten::linear",
        "gemm",  # starts with aten::addmm, and is longer: the longer first
        "aten::addmm",
        "relu",
        "cudaStreamSynchronize",
        "cudaStreamSynchronize",  # the last one: Next stays there
        "cudaStreamSynchronize",
    ]
    assert widget.status_text == (
        "Event 7 of 7: cudaStreamSynchronize: a CUDA runtime call made by the CPU (a launch, "
        "a copy or a wait), on CPU thread 1, from 5.000 ms for 4.000 ms."
    )


def test_one_lane_and_the_longest_gap():
    widget = TimelineWidget(trace())
    widget.lane.value = GPU
    assert [e.name for e in widget.walk()] == ["gemm", "relu"]
    assert widget.status_text.startswith("Event 1 of 2: gemm: a kernel, running on the GPU")
    widget.gap.click()  # GPU stream in step 1: busy 2-6 ms; gaps 0-2 and 6-10: 6-10 is longest
    assert widget.status_text.startswith(
        "Longest gap on GPU 0 stream 7: 4.000 ms, from 6.000 to 10.000 ms. "
    )
    widget.lane.value = CPU
    widget.gap.click()  # CPU work 1-4 and 5-9: gaps 0-1, 4-5, 9-10: the first, 1 ms
    assert widget.status_text.startswith(
        "Longest gap on CPU thread 1: 1.000 ms, from 0.000 to 1.000 ms."
    )
    assert widget.current.name == "aten::linear"


def test_the_summary_counts_overlaps_once_per_lane_and_follows_the_step():
    widget = TimelineWidget(trace())
    summaries = {s.lane: s for s in widget.summaries()}
    assert summaries[GPU].busy_us == 4_000  # 2-5 and 4-6 overlap: 2-6 ms
    assert summaries[CPU].busy_us == 7_000  # 1-4 (addmm inside linear) and 5-9
    cells = re.findall(r"<td>(.*?)</td>", widget.summary.value)
    assert cells[:4] == ["CPU thread 1", "7 ms of 10 ms", "70%", "1 ms, from 0.000 to 1.000 ms"]
    assert cells[4:8] == ["GPU 0 stream 7", "4 ms of 10 ms", "40%", "4 ms, from 6.000 to 10.000 ms"]
    widget.step.value = 2
    assert widget.status_text.startswith("Event 1 of 3: ProfilerStep#2")
    assert {s.lane: s.busy_us for s in widget.summaries()} == {CPU: 1_000, GPU: 1_000}
    widget.step.value = "all"
    assert widget.window() == (0, 20_000)
    assert {s.lane: s.busy_us for s in widget.summaries()} == {CPU: 8_000, GPU: 5_000}


def test_zoom_narrows_the_drawn_stretch_around_the_event():
    widget = TimelineWidget(trace())
    assert widget.view_range() == (0, 10_000)
    for _ in range(3):
        widget.next.click()  # gemm, 2-5 ms
    widget.zoom.value = 4
    assert widget.view_range() == (2_250, 4_750)
    assert ">2.250<" in widget.timeline.value and ">4.750<" in widget.timeline.value
    widget.previous.click()
    widget.previous.click()  # forward, 0-6 ms
    assert widget.current.name == "forward" and widget.view_range() == (1_750, 4_250)
    widget.next.click()
    widget.lane.value = CPU
    widget.step.value = 2
    assert widget.current.name == "ProfilerStep#2"
    assert widget.view_range() == (13_750, 16_250)
    widget.zoom.value = 1
    assert widget.view_range() == (10_000, 20_000)
    one = TimelineWidget([Event(CPU, "a", 0, 100, "cpu_op"), Event(CPU, "b", 9_900, 100, "cpu_op")])
    one.zoom.value = 2
    assert one.view_range() == (0, 5_000)  # clamped at the start of the trace
    one.next.click()
    assert one.view_range() == (5_000, 10_000)  # and at its end


def test_a_trace_without_steps_is_shown_whole_and_an_empty_one_is_refused():
    widget = TimelineWidget([Event(CPU, "aten::mm", 5, 10, "cpu_op")], title="A trace")
    assert widget.step.value == "all" and widget.window() == (5, 15)
    assert widget.view.children[0].value == "<b>A trace</b>"
    with pytest.raises(ValueError, match="no events"):
        TimelineWidget([Event(CPU, "f", 0, 1, "python_function")])


def test_the_display_bundle_has_the_fallback_and_css_classes():
    widget = TimelineWidget(trace())
    bundle = widget._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.view.model_id
    assert bundle["text/html"].startswith('<div class="trace-fallback">')
    for control in ("Step", "Lane", "Zoom", "Previous event", "Next event", "Longest gap"):
        assert control in bundle["text/html"]
    assert "%" not in bundle["text/html"] and " ms" not in bundle["text/html"]
    assert "trace" in widget.view._dom_classes
    for part in (
        "step",
        "lane",
        "zoom",
        "previous",
        "next",
        "gap",
        "timeline",
        "result",
        "summary",
    ):
        control = getattr(widget, "status" if part == "result" else part)
        assert f"trace-{part}" in control._dom_classes, part
