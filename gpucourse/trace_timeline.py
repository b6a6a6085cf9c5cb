"""A profiler trace as plain data, with no widgets: lanes of events, steps, busy time, gaps.

``torch.profiler.profile(...).export_chrome_trace(path)`` writes a JSON file in the Chrome
trace event format: an object with ``traceEvents``, a list of events. Kineto, PyTorch's
tracing library, writes each piece of work as a *complete* event (``"ph": "X"``) with

* ``cat``: the kind of work, one of kineto's ``ActivityType`` names: ``cpu_op`` (a PyTorch
  operator on a CPU thread), ``user_annotation`` (a ``record_function`` range, and the
  ``ProfilerStep#N`` range that ``prof.step()`` marks), ``cuda_runtime`` and
  ``cuda_driver`` (a CUDA call made by a CPU thread: a kernel launch, a copy, a wait),
  ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` (work on the GPU),
  ``gpu_user_annotation`` (a ``record_function`` range as the GPU ran it),
  ``python_function`` (with ``with_stack=True``), and ``Trace`` (the profiler's own span);
* ``pid`` and ``tid``: for CPU work and CUDA calls, the process and the thread; for GPU
  work, the device index and the CUDA stream;
* ``ts`` and ``dur``: the start and the duration in microseconds.

(kineto: ``libkineto/src/ActivityType.cpp`` for the names, ``output_json.cpp`` for the
format, ``CuptiActivity.h``: a GPU activity's ``deviceId`` and ``streamId``.)

``events_from_chrome_trace(trace)`` turns that into :class:`Event` s on lanes named in words
("CPU thread 1", "GPU 0 stream 7"), with times in microseconds from the trace's first
event. ``steps(events)`` reads the ``ProfilerStep#N`` ranges; ``lane_summary(events, start,
end)`` gives each lane's busy time in a window, the **union** of its events clipped to the
window (CPU operators nest: ``aten::linear`` holds ``aten::addmm``, counted once), its busy
share and its longest idle gap. Ranges (``record_function``) say where the time went; they
are not work, so they count towards no lane's busy time.

Nothing here imports torch; ``events_from_profiler`` takes a profiler that has finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

# Work: what keeps a CPU thread or a GPU stream busy.
WORK = frozenset({"cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset"})
# Ranges: names for stretches of time (record_function, ProfilerStep#N).
RANGES = frozenset({"user_annotation", "gpu_user_annotation"})
# Work that runs on the GPU: its pid is the device, its tid the stream.
ON_GPU = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})

KINDS = {
    "cpu_op": "a PyTorch operator, run by the CPU",
    "user_annotation": "a range marked with record_function",
    "cuda_runtime": "a CUDA runtime call made by the CPU (a launch, a copy or a wait)",
    "cuda_driver": "a CUDA driver call made by the CPU",
    "kernel": "a kernel, running on the GPU",
    "gpu_memcpy": "a copy between memories, done by the GPU",
    "gpu_memset": "a memory fill, done by the GPU",
    "gpu_user_annotation": "a record_function range, as the GPU ran it",
    "python_function": "a Python function",
}
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class Event:
    """One piece of work (or one range) on one lane; times in microseconds."""

    lane: str
    name: str
    start_us: float
    dur_us: float
    cat: str

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass(frozen=True)
class Step:
    """One ``ProfilerStep#number`` range: the training step that ``prof.step()`` ended."""

    number: int
    start_us: float
    end_us: float

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


@dataclass(frozen=True)
class LaneSummary:
    """What one lane did in a window: busy time (overlaps counted once), its share of the
    window, and its longest idle gap (``gap_start_us`` to ``gap_end_us``)."""

    lane: str
    busy_us: float
    window_us: float
    gap_us: float
    gap_start_us: float
    gap_end_us: float

    @property
    def share(self) -> float:
        return self.busy_us / self.window_us if self.window_us > 0 else 0.0

    def line(self) -> str:
        """The summary in words, times in ms."""
        gap = (
            f"longest gap {self.gap_us / 1e3:.3g} ms, from {self.gap_start_us / 1e3:.3g} ms"
            if self.gap_us > 0
            else "no gap"
        )
        return (
            f"{self.lane}: busy {self.busy_us / 1e3:.3g} ms of {self.window_us / 1e3:.3g} ms "
            f"({self.share:.0%}); {gap}"
        )


# -- reading a trace ----------------------------------------------------------------------
def events_from_chrome_trace(trace) -> list[Event]:
    """The complete events of a Chrome trace (a dict with ``traceEvents``, a list of events,
    a JSON string or a path), on lanes named in words, from 0 µs at the first event."""
    if isinstance(trace, (str, Path)) and not str(trace).lstrip().startswith(("{", "[")):
        trace = Path(trace).read_text()
    if isinstance(trace, str):
        trace = json.loads(trace)
    raw = trace.get("traceEvents", []) if isinstance(trace, dict) else list(trace)
    complete = [
        e
        for e in raw
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and e.get("cat") in WORK | RANGES | {"python_function"}
        and isinstance(e.get("ts"), (int, float))
    ]
    if not complete:
        return []
    names = _lane_names(complete)
    origin = min(float(e["ts"]) for e in complete)
    events = [
        Event(
            lane=names[_lane_key(e)],
            name=str(e.get("name", "")),
            start_us=round(float(e["ts"]) - origin, 3),  # to the nanosecond kineto writes
            dur_us=round(max(float(e.get("dur", 0) or 0), 0.0), 3),
            cat=str(e["cat"]),
        )
        for e in complete
    ]
    return sorted(events, key=lambda e: (e.start_us, -e.dur_us))


def events_from_profiler(prof) -> list[Event]:
    """The events of a finished ``torch.profiler.profile``, through its Chrome trace (written
    to a temporary file, read, and removed). A profile's trace is saved once: after this,
    ``prof.export_chrome_trace`` raises "Trace is already saved"."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        return events_from_chrome_trace(Path(path))


def _lane_key(event: dict) -> tuple[str, str, str]:
    side = "gpu" if event.get("cat") in ON_GPU else "cpu"
    return side, str(event.get("pid")), str(event.get("tid"))


def _lane_names(events: list[dict]) -> dict[tuple[str, str, str], str]:
    """CPU threads numbered from 1 in the order they first appear; GPU lanes by device and
    stream, as the trace numbers them."""
    first: dict[tuple[str, str, str], float] = {}
    for e in events:
        key = _lane_key(e)
        first[key] = min(first.get(key, float("inf")), float(e["ts"]))
    names = {}
    cpu = sorted((k for k in first if k[0] == "cpu"), key=lambda k: first[k])
    for number, key in enumerate(cpu, start=1):
        names[key] = f"CPU thread {number}"
    for key in (k for k in first if k[0] == "gpu"):
        names[key] = f"GPU {key[1]} stream {key[2]}"
    return names


# -- what a trace says ------------------------------------------------------------------------
def lanes(events: list[Event]) -> list[str]:
    """The lanes, CPU threads first (in number order), then GPU streams."""
    seen = sorted({e.lane for e in events})
    return sorted(seen, key=lambda lane: (lane.startswith("GPU"), _natural(lane)))


def _natural(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def steps(events: list[Event]) -> list[Step]:
    """The ``ProfilerStep#N`` ranges on the CPU, in order: the steps the profiler recorded."""
    found = {}
    for e in events:
        match = STEP_NAME.match(e.name)
        if match and e.cat == "user_annotation":
            number = int(match[1])
            if number not in found:
                found[number] = Step(number, e.start_us, e.end_us)
    return [found[n] for n in sorted(found)]


def union(intervals, start_us: float, end_us: float) -> list[tuple[float, float]]:
    """The union of ``(start, end)`` intervals clipped to the window, as disjoint intervals
    in order."""
    clipped = sorted(
        (max(a, start_us), min(b, end_us))
        for a, b in intervals
        if min(b, end_us) > max(a, start_us)
    )
    merged: list[list[float]] = []
    for a, b in clipped:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def lane_summary(
    events: list[Event], start_us: float, end_us: float, categories=WORK
) -> list[LaneSummary]:
    """Each lane with work in the trace: its busy time in the window ``start_us`` to
    ``end_us`` (the union of its events of ``categories``, clipped to the window), and its
    longest idle gap there (before its first event and after its last one count too)."""
    if end_us < start_us:
        raise ValueError(f"the window ends ({end_us}) before it starts ({start_us})")
    work = [e for e in events if e.cat in categories]
    summaries = []
    for lane in lanes(work):
        busy = union(((e.start_us, e.end_us) for e in work if e.lane == lane), start_us, end_us)
        edges = [start_us] + [x for interval in busy for x in interval] + [end_us]
        gaps = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
        gap = max(gaps, key=lambda g: (g[1] - g[0], -g[0]))
        summaries.append(
            LaneSummary(
                lane=lane,
                busy_us=sum(b - a for a, b in busy),
                window_us=end_us - start_us,
                gap_us=gap[1] - gap[0],
                gap_start_us=gap[0],
                gap_end_us=gap[1],
            )
        )
    return summaries


def range_totals(
    events: list[Event], start_us: float, end_us: float, names=None
) -> dict[str, float]:
    """The time in the window covered by each ``record_function`` range on the CPU (the
    union of its occurrences, so nested or repeated ranges count once), largest first.
    ``names``: only these ranges, each one listed even if it never ran (0); by default every
    range but the ``ProfilerStep#N`` ones, which cover the whole step."""
    if names is None:
        names = {
            e.name for e in events if e.cat == "user_annotation" and not STEP_NAME.match(e.name)
        }
    totals = {
        name: sum(
            b - a
            for a, b in union(
                (
                    (e.start_us, e.end_us)
                    for e in events
                    if e.name == name and e.cat == "user_annotation"
                ),
                start_us,
                end_us,
            )
        )
        for name in names
    }
    return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))


def describe(event: Event) -> str:
    """The event in words: its name, what kind of work it is, its lane, when and how long."""
    match = STEP_NAME.match(event.name)
    kind = (
        f"the profiler's step {match[1]}"
        if match
        else KINDS.get(event.cat, f"an event of kind {event.cat}")
    )
    return (
        f"{event.name}: {kind}, on {event.lane}, from {event.start_us / 1e3:.3f} ms "
        f"for {event.dur_us / 1e3:.3f} ms"
    )


# -- a trace kept as data ------------------------------------------------------------------
def trim_trace(trace: dict, keep_steps: int = 2, recorded_on: dict | None = None) -> dict:
    """A small copy of a Chrome trace, to keep as data: the complete events of the first
    ``keep_steps`` recorded steps (work and ranges, on every lane, from the first step's start
    to the last kept step's end), the metadata events that name their processes and threads,
    and ``recordedOn`` (where and with what it was recorded: say so wherever it is shown)."""
    raw = trace.get("traceEvents", [])
    kept_steps = sorted(
        (int(STEP_NAME.match(e["name"])[1]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in raw
        if e.get("ph") == "X"
        and e.get("cat") == "user_annotation"
        and STEP_NAME.match(str(e.get("name", "")))
    )[:keep_steps]
    if not kept_steps:
        raise ValueError("trim_trace: the trace has no ProfilerStep#N range to keep")
    start, end = kept_steps[0][1], max(step[2] for step in kept_steps)
    events = [
        e
        for e in raw
        if e.get("ph") == "X"
        and e.get("cat") in WORK | RANGES
        and float(e["ts"]) < end
        and float(e["ts"]) + float(e.get("dur", 0)) > start
    ]
    events = [
        {k: v for k, v in e.items() if k != "args"} for e in events
    ]  # ids, shapes: not needed
    places = {(e.get("pid"), e.get("tid")) for e in events}
    pids = {pid for pid, _ in places}
    names = [
        e
        for e in raw
        if e.get("ph") == "M"
        and (
            (e.get("name") == "process_name" and e.get("pid") in pids)
            or (e.get("name") == "thread_name" and (e.get("pid"), e.get("tid")) in places)
        )
    ]
    return {
        "schemaVersion": trace.get("schemaVersion", 1),
        "recordedOn": dict(recorded_on or {}),
        "traceEvents": names + events,
    }


# -- quiet profiling ----------------------------------------------------------------------------
@contextlib.contextmanager
def quiet_native_logs():
    """Sends what native code writes straight to the process's stderr (file descriptor 2)
    to /dev/null while the block runs: some PyTorch builds' profilers log a line there
    each time they start and stop. Python's own warnings and errors still show, but for one:
    some releases warn that the profiler "clears events at the end of each cycle", which is
    noise where, as in the lessons, a schedule records a single cycle."""
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2: nothing to quiet
        saved = None
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(warnings.catch_warnings())
            warnings.filterwarnings("ignore", ".*Profiler clears events at the end of each cycle")
            if saved is not None:
                sink = stack.enter_context(open(os.devnull, "w"))
                os.dup2(sink.fileno(), 2)
                stack.callback(os.dup2, saved, 2)
            yield
    finally:
        if saved is not None:
            os.close(saved)
