"""Prints the lessons' speed figures side by side with their targets.

1. Each lesson's wall time, top to bottom on the CPU with nbclient: kernel start and
   torch import included. Target: 20 s on a 2-core machine.
2. The race (gpu_tensors): the time from a slider change to the updated result line,
   inside a real kernel (the widget's messages are sent; the browser's drawing is not
   included), and its frames per second while it plays, against the 30 it aims for.
3. The training widget (gpu_training): steps per second of the bare training loop, of the
   same loop inside the widget as the widget measures it, and of the widget's whole run,
   redraws and pauses included; the time to redraw the curve and the status; and what
   reading the loss every step costs here against every 100 steps.
4. The pipeline timeline (gpu_data_loading): a setting change to its redraw, and its frames
   per second while it plays.
5. The trace timeline (gpu_profiling): a press of Next event to the redrawn timeline, on a
   trace of the profiling lesson's slow loop recorded in the kernel.

Run: .venv/bin/python benchmarks/bench_lesson.py [--runs N] [--unit UNIT ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import nbclient
import nbformat
import tomllib
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 20.0
with open(ROOT / "pyproject.toml", "rb") as _file:
    UNITS = tomllib.load(_file)["tool"]["gpucourse"]["units"]

WIDGET_CELLS = [
    """
from gpucourse.race_widget import RaceWidget, SECONDS_PER_FRAME
race = RaceWidget()
race.play_now()  # reveal results, so a slider change updates the result line
""",
    """
import json, time
def slider_change_ms(repeats=200):
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        race.steps.value = 2 + i % 60
        assert race.status_text.startswith(f"{2 + i % 60} steps:")
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)
ms = slider_change_ms()
print(json.dumps({"slider_median_ms": ms[len(ms) // 2], "slider_p95_ms": ms[int(len(ms) * 0.95)]}))
""",
    """
race.steps.value = 64   # the longest race: the most frames
frames = len(race.race.frame_times(64, 120))
start = time.perf_counter()
await race.play()
played = time.perf_counter() - start
start = time.perf_counter()
race.play_now()
drawn = time.perf_counter() - start
print(json.dumps({"frames": frames, "play_fps": frames / played, "aim_fps": 1 / SECONDS_PER_FRAME,
                  "max_fps": frames / drawn, "play_s": played}))
""",
]


TRAINING_CELLS = [
    """
import json, time
from gpucourse.training import Trainer, measure_reads
from gpucourse.training_widget import TrainingWidget
bare = Trainer(read_every=10)
bare.run(steps=50)   # warm up
runs = []
for _ in range(3):   # the best of three: other programs on the machine only slow it down
    start = time.perf_counter()
    bare.run(steps=500)
    runs.append(500 / (time.perf_counter() - start))
bare_steps_s = max(runs)
""",
    """
widget = TrainingWidget(max_steps=2000, read_every=10)
start = time.perf_counter()
await widget.play()
wall = time.perf_counter() - start
segment = widget.trainer.segment
redraws = []
for _ in range(20):
    t = time.perf_counter()
    widget._draw()
    redraws.append((time.perf_counter() - t) * 1e3)
cost = measure_reads("cpu")
print(json.dumps({"bare_steps_s": bare_steps_s, "widget_steps_s": segment.steps_per_s,
                  "widget_wall_steps_s": 2000 / wall, "redraw_ms": sorted(redraws)[10],
                  "reads": len(widget.trainer.readings), "every_1_steps_s": cost.often_steps_per_s,
                  "every_100_steps_s": cost.rarely_steps_per_s}))
""",
]


PIPELINE_CELLS = [
    """
import json, time
from gpucourse.pipeline_widget import FRAMES, SECONDS_PER_FRAME, PipelineWidget
timeline = PipelineWidget()
timeline.play_now()  # reveal results, so a change redraws the whole timeline
changes = []
for i in range(200):
    start = time.perf_counter()
    timeline.workers.value = (i + 1) % 5
    assert "a batch in steady state" in timeline.status_text
    changes.append((time.perf_counter() - start) * 1e3)
changes.sort()
start = time.perf_counter()
await timeline.play()
played = time.perf_counter() - start
print(json.dumps({"change_median_ms": changes[100], "change_p95_ms": changes[190],
                  "play_fps": (FRAMES + 1) / played, "aim_fps": 1 / SECONDS_PER_FRAME}))
""",
]


TRACE_CELLS = [
    """
import json, time
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from gpucourse.slow_images import SlowImages, small_network
from gpucourse.timeline_widget import TimelineWidget
from gpucourse.trace_timeline import events_from_profiler, quiet_native_logs
from torch.utils.data import DataLoader
model = small_network()
batches = iter(DataLoader(SlowImages(), batch_size=32))
with quiet_native_logs(), profile(
    activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3, repeat=1)
) as prof:
    for _ in range(5):
        with record_function("load"):
            images, labels = next(batches)
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(images.float()), labels)
        prof.step()
events = events_from_profiler(prof)
timeline = TimelineWidget(events)
clicks = []
for i in range(200):
    start = time.perf_counter()
    (timeline.next if i % 40 < 20 else timeline.previous).click()
    assert timeline.status_text.startswith("Event ")
    clicks.append((time.perf_counter() - start) * 1e3)
clicks.sort()
print(json.dumps({"click_median_ms": clicks[100], "click_p95_ms": clicks[190],
                  "events": len(timeline.walk())}))
""",
]


def run(nb, timeout=120):
    start = time.perf_counter()
    nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(ROOT / "notebooks")}},
    ).execute()
    return time.perf_counter() - start


def lesson_wall_time(unit: str) -> float:
    return run(nbformat.read(ROOT / "notebooks" / f"{unit}.ipynb", as_version=4))


def widget_figures(cells=WIDGET_CELLS) -> dict:
    nb = new_notebook(cells=[new_code_cell(c.strip()) for c in cells])
    run(nb)
    figures = {}
    for cell in nb.cells:
        for out in cell.outputs:
            if out.output_type == "stream":
                figures.update(json.loads(out.text.strip().splitlines()[-1]))
            if out.output_type == "error":
                raise RuntimeError(f"{out.ename}: {out.evalue}")
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="lesson runs (default 3)")
    parser.add_argument(
        "--unit",
        nargs="*",
        default=UNITS,
        choices=UNITS,
        help="the units to measure (default: all)",
    )
    args = parser.parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the kernels run the CPU lesson, even on a GPU

    print(f"{'figure':<52}{'measured':>14}{'target':>12}{'ratio':>8}")
    for unit in args.unit:
        walls = [lesson_wall_time(unit) for _ in range(args.runs)]
        best, median = min(walls), statistics.median(walls)
        print(
            f"{unit + ' lesson wall time, CPU, median of ' + str(args.runs):<52}{median:>12.1f} s"
            f"{TARGET_S:>10.0f} s{median / TARGET_S:>8.2f}"
        )
        print(
            f"{unit + ' lesson wall time, CPU, best':<52}{best:>12.1f} s{TARGET_S:>10.0f} s"
            f"{best / TARGET_S:>8.2f}   (runs: {', '.join(f'{x:.1f}' for x in walls)} s)"
        )
    if "gpu_tensors" in args.unit:
        w = widget_figures()
        print(
            f"{'race: slider change -> result line, median':<52}{w['slider_median_ms']:>11.2f} ms"
        )
        print(f"{'race: slider change -> result line, 95th pct':<52}{w['slider_p95_ms']:>11.2f} ms")
        print(
            f"{'race: frames per second while playing':<52}{w['play_fps']:>10.1f} fps"
            f"{w['aim_fps']:>8.0f} fps{w['play_fps'] / w['aim_fps']:>8.2f}"
        )
        print(
            f"{'race: frames per second, no pauses (ceiling)':<52}{w['max_fps']:>10.0f} fps"
            f"   ({w['frames']} frames for 64 steps, played in {w['play_s']:.2f} s)"
        )
    if "gpu_training" in args.unit:
        t = widget_figures(TRAINING_CELLS)
        print(
            f"{'training: bare loop, read every 10, best of 3 (steps/s)':<52}{t['bare_steps_s']:>14,.0f}"
        )
        print(
            f"{'training: in the widget, as it measures (steps/s)':<52}{t['widget_steps_s']:>14,.0f}"
            f"{'':>12}{t['widget_steps_s'] / t['bare_steps_s']:>8.2f}"
        )
        print(
            f"{'training: widget run, redraws included (steps/s)':<52}"
            f"{t['widget_wall_steps_s']:>14,.0f}{'':>12}{t['widget_wall_steps_s'] / t['bare_steps_s']:>8.2f}"
        )
        print(
            f"{'training: redraw of curve, status, table (median)':<52}{t['redraw_ms']:>11.2f} ms"
            f"   ({t['reads']} reads on the curve)"
        )
        print(
            f"{'training: read every step / every 100 (steps/s)':<52}"
            f"{t['every_1_steps_s']:>7,.0f}/{t['every_100_steps_s']:,.0f}{'':>6}"
            f"{t['every_1_steps_s'] / t['every_100_steps_s']:>8.2f}"
        )
    if "gpu_data_loading" in args.unit:
        p = widget_figures(PIPELINE_CELLS)
        print(
            f"{'timeline: setting change -> redrawn, median':<52}{p['change_median_ms']:>11.2f} ms"
        )
        print(
            f"{'timeline: setting change -> redrawn, 95th pct':<52}{p['change_p95_ms']:>11.2f} ms"
        )
        print(
            f"{'timeline: frames per second while playing':<52}{p['play_fps']:>10.1f} fps"
            f"{p['aim_fps']:>8.0f} fps{p['play_fps'] / p['aim_fps']:>8.2f}"
        )
    if "gpu_profiling" in args.unit:
        t = widget_figures(TRACE_CELLS)
        print(
            f"{'trace timeline: Next event -> redrawn, median':<52}{t['click_median_ms']:>11.2f} ms"
            f"   ({t['events']} events in a step of the slow loop)"
        )
        print(
            f"{'trace timeline: Next event -> redrawn, 95th pct':<52}{t['click_p95_ms']:>11.2f} ms"
        )
    print(f"({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
