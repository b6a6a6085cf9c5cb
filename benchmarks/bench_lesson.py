"""Prints the lesson's speed figures side by side with their targets.

1. The lesson's wall time, top to bottom on the CPU with nbclient: kernel start and
   torch import included. Target: 20 s on a 2-core machine.
2. The time from a slider change to the updated result line, inside a real kernel
   (the widget's messages are sent; the browser's drawing is not included).
3. The race's frames per second while it plays in that kernel, against the 30 frames
   per second it aims for, and the most it could draw with no pauses.

Run: .venv/bin/python benchmarks/bench_lesson.py [--runs N]
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
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
LESSON = ROOT / "notebooks" / "gpu_tensors.ipynb"
TARGET_S = 20.0

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
        assert race.result_text.startswith(f"{2 + i % 60} steps:")
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


def run(nb, timeout=120):
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(LESSON.parent)}}).execute()
    return time.perf_counter() - start


def lesson_wall_time() -> float:
    return run(nbformat.read(LESSON, as_version=4))


def widget_figures() -> dict:
    nb = new_notebook(cells=[new_code_cell(c.strip()) for c in WIDGET_CELLS])
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
    args = parser.parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the kernels run the CPU lesson, even on a GPU

    walls = [lesson_wall_time() for _ in range(args.runs)]
    w = widget_figures()
    best, median = min(walls), statistics.median(walls)
    print(f"{'figure':<44}{'measured':>14}{'target':>12}{'ratio':>8}")
    print(f"{'lesson wall time, CPU, median of ' + str(args.runs):<44}{median:>12.1f} s"
          f"{TARGET_S:>10.0f} s{median / TARGET_S:>8.2f}")
    print(f"{'lesson wall time, CPU, best':<44}{best:>12.1f} s{TARGET_S:>10.0f} s"
          f"{best / TARGET_S:>8.2f}")
    print(f"{'slider change -> result line, median':<44}{w['slider_median_ms']:>11.2f} ms"
          f"{'':>12}{'':>8}")
    print(f"{'slider change -> result line, 95th pct':<44}{w['slider_p95_ms']:>11.2f} ms")
    print(f"{'race frames per second while playing':<44}{w['play_fps']:>10.1f} fps"
          f"{w['aim_fps']:>8.0f} fps{w['play_fps'] / w['aim_fps']:>8.2f}")
    print(f"{'race frames per second, no pauses (ceiling)':<44}{w['max_fps']:>10.0f} fps")
    print(f"({w['frames']} frames for 64 steps, played in {w['play_s']:.2f} s; "
          f"lesson runs: {', '.join(f'{x:.1f}' for x in walls)} s; {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
