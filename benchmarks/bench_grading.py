"""Grading throughput: plain nbgrader against course-grade, side by side.

Grades the same class (honest submissions from tests/submissions_gpu_tensors.py, copied to N
students) four ways, each in a fresh copy of the course:
  plain     `nbgrader autograde` (serial, no sandbox)
  serial    `course-grade --jobs 1` (sandboxed)
  parallel  `course-grade --jobs <cpus>` (sandboxed, this machine's process pool)
  cluster   `course-grade --scheduler ...` on a Dask cluster of <cpus> workers on this
            machine (`dask scheduler`, `dask worker`): the cluster path's own cost is its
            time per submission over the local pool's, with as many workers
and prints submissions per minute, parallel/plain, the sandbox's overhead (serial
against plain), where each submission's time goes, and how the parallel pipeline's time
grows from 10 to N submissions; with plain and growth, the CPU each added submission costs
each way and the CPU each pays once a run (from a run of 10 and a run of N). course-grade's
time includes what plain nbgrader does not do: a second (test) kernel, feedback and export.

    .venv/bin/python benchmarks/bench_grading.py            # 40 submissions
    .venv/bin/python benchmarks/bench_grading.py --n 12     # a quick look
    .venv/bin/python benchmarks/bench_grading.py --n 8 --ways serial   # breakdown only
    .venv/bin/python benchmarks/bench_grading.py --n 30 --ways plain,parallel,growth
        # also CPU each added submission costs, and CPU paid once a run (runs of 10 too)
    .venv/bin/python benchmarks/bench_grading.py --gpu --jobs 8   # on a CUDA GPU
Needs root and bwrap, like course-grade itself. With --gpu, course-grade grades with --gpu (the
kernels see the GPU, and the hidden tests run on cuda too); plain nbgrader sees it anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from autograder.coordinator.importers import _nbgrader  # noqa: E402
from tests.class_fixture import NOTEBOOK, build_course, honest_cases  # noqa: E402

ASSIGNMENT = "gpu_tensors"


def make_class(n: int, tmp: Path) -> Path:
    course = build_course(tmp)
    cases = honest_cases()
    for i in range(n):
        case = cases[i % len(cases)]
        dest = course / "submitted" / f"s{i:03d}" / ASSIGNMENT
        dest.mkdir(parents=True)
        nbformat.write(case.nb, dest / NOTEBOOK)
    return course


def busy_cpu_seconds() -> float:
    """CPU seconds this machine has spent busy since it started (all cores, /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


BUSY: dict[str, float] = {}  # way -> busy CPU seconds of the whole machine during its run


def timed(label: str, command) -> float:
    busy, start = busy_cpu_seconds(), time.perf_counter()
    result = command()
    seconds = time.perf_counter() - start
    BUSY[label] = busy_cpu_seconds() - busy
    if result.returncode not in (0, 1):  # nbgrader exits 1 when a notebook errors
        raise SystemExit(f"{label} failed:\n{result.stderr[-2000:]}")
    return seconds


def plain(course: Path):
    return _nbgrader(course, "autograde", ASSIGNMENT, "--force")


GPU: list[str] = []  # ["--gpu"] with --gpu


def pipeline(course: Path, jobs: int):
    cli = Path(sys.executable).parent / "course-grade"
    return subprocess.run(
        [str(cli), ASSIGNMENT, "--course", str(course), "--jobs", str(jobs), "--no-progress", *GPU],
        capture_output=True,
        text=True,
    )


def on_cluster(course: Path, workers: int, base: Path):
    """course-grade on a Dask cluster of ``workers`` started here; the cluster's start-up
    is not counted (an instructor's cluster is already running)."""
    from tests.servers import dask_cluster

    folder = Path(tempfile.mkdtemp(dir=base))
    with dask_cluster(workers, folder) as (address, _, _):
        cli = Path(sys.executable).parent / "course-grade"
        start = time.perf_counter()
        result = subprocess.run(
            [
                str(cli),
                ASSIGNMENT,
                "--course",
                str(course),
                "--scheduler",
                address,
                "--no-progress",
                *GPU,
            ],
            capture_output=True,
            text=True,
        )
        on_cluster.seconds = time.perf_counter() - start
    return result


def breakdown(course: Path, workers: int) -> dict[str, float]:
    """Mean seconds per graded submission in each step (a step once per worker: per
    worker), from the pipeline's report."""
    from autograder.coordinator.report import export_grades

    rows = json.loads((course / "reports" / ASSIGNMENT / "report.json").read_text())
    graded = [r for r in rows if r.get("phases")]
    steps: dict[str, float] = {}
    for row in graded:
        for step, seconds in row["phases"].items():
            share = 1 / workers if "once per worker" in step else 1 / len(graded)
            steps[step] = steps.get(step, 0.0) + seconds * share
    start = time.perf_counter()
    export_grades(course, [ASSIGNMENT], course / "grades-again.csv")  # what the CLI does once
    steps["export (once per run) / n"] = (time.perf_counter() - start) / max(1, len(rows))
    steps["per submission, all steps"] = sum(r["seconds"] for r in graded) / len(graded)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40, help="submissions (default 40)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--ways",
        default="plain,serial,parallel,cluster,growth",
        help="which runs, comma-separated (default: all)",
    )
    parser.add_argument(
        "--gpu", action="store_true", help="course-grade --gpu (needs a CUDA GPU and its devices)"
    )
    args = parser.parse_args()
    if args.gpu:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--gpu: torch.cuda.is_available() is False on this machine")
        GPU.append("--gpu")
    ways = set(args.ways.split(","))
    base = Path(tempfile.mkdtemp(prefix="bench-grading-"))
    try:
        times, steps = {}, {}
        for way, run in [
            ("plain", plain),
            ("serial", lambda c: pipeline(c, 1)),
            ("parallel", lambda c: pipeline(c, args.jobs)),
            ("cluster", lambda c: on_cluster(c, args.jobs, base)),
        ]:
            if way not in ways:
                continue
            course = make_class(args.n, Path(tempfile.mkdtemp(dir=base)))
            times[way] = timed(way, lambda: run(course))  # noqa: B023 - called here, at once
            if way == "cluster":
                times[way] = on_cluster.seconds  # the cluster was up before the command
                BUSY.pop(way, None)  # which counted the cluster's start as well
            if way != "plain":
                steps[way] = breakdown(course, 1 if way == "serial" else args.jobs)
        if "growth" in ways:
            small = make_class(10, Path(tempfile.mkdtemp(dir=base)))
            t10 = timed("parallel, 10", lambda: pipeline(small, args.jobs))
            if "plain" in ways:  # plain's own cost a run, to set each added submission against
                small = make_class(10, Path(tempfile.mkdtemp(dir=base)))
                timed("plain, 10", lambda: plain(small))  # noqa: B023 - called here, at once
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(args, times, steps, t10 if "growth" in ways else None)


def grading_seconds(table: dict) -> float:
    """The seconds of what plain nbgrader also does: autograde, all its steps."""
    return sum(
        v
        for k, v in table.items()
        if k not in ("feedback", "export (once per run) / n", "per submission, all steps")
        and "once per worker" not in k
    )


LABELS = {
    "plain": "plain nbgrader autograde, serial",
    "serial": "course-grade --jobs 1, sandboxed",
    "parallel": "course-grade --jobs {jobs}, sandboxed",
    "cluster": "course-grade on {jobs} Dask workers",
}


def report(args, times: dict, steps: dict, t10: float | None) -> None:
    n, jobs = args.n, args.jobs
    on = f"{os.cpu_count()} CPUs"
    if args.gpu:
        import torch

        on += (
            f" and {torch.cuda.get_device_name(0)} (course-grade --gpu; torch {torch.__version__})"
        )
    print(f"\nGrading {n} submissions of {ASSIGNMENT} on {on} (wall time of the whole command)")
    print("  plain: autograde only (one kernel, no sandbox, no feedback, no export)")
    print(
        "  course-grade: inbox checks; per submission a sandboxed student kernel for the "
        "answers and a sandboxed test kernel forked from a template for the tests; feedback, grades.csv, report"
    )
    print(
        f"{'way':40s} {'seconds':>9s} {'submissions/min':>16s} {'CPU s/submission':>17s}"
        f" {'CPUs busy':>10s}"
    )
    for way, seconds in times.items():
        busy = BUSY.get(way)
        cpu = f"{busy / n:17.2f} {busy / seconds:10.2f}" if busy is not None else ""
        print(f"{LABELS[way].format(jobs=jobs):40s} {seconds:9.1f} {n / seconds * 60:16.1f} {cpu}")
    print("  (CPU: the whole machine's busy time during the run, all processes, /proc/stat)")
    for way, table in steps.items():
        workers = 1 if way == "serial" else jobs
        print(f"\n{LABELS[way].format(jobs=jobs)}: mean seconds per graded submission, by step")
        for step, seconds in table.items():
            print(f"  {step:38s} {seconds:7.2f}")
        grading = grading_seconds(table)
        if grading:
            print(
                f"  grading phase alone (sandboxed autograde, what plain does): "
                f"{60 * workers / grading:.1f} submissions/min"
            )
    print()
    if "plain" in times:
        plain_s = times["plain"]
        if "serial" in times:
            for what, ratio, target in [
                (
                    "whole pipeline (serial vs plain)",
                    times["serial"] / plain_s,
                    "   (target <= 10%)",
                ),
                (
                    "grading phase alone (serial autograde vs plain)",
                    grading_seconds(steps["serial"]) / (plain_s / n),
                    "",
                ),
            ]:
                print(f"sandbox overhead, {what}: {(ratio - 1) * 100:+.0f}%{target}")
        if "parallel" in times:
            for what, ratio, target in [
                ("whole pipeline", plain_s / times["parallel"], "   (target >= 3x, floor 2.5x)"),
                (
                    "grading phase alone",
                    (plain_s / n) / (grading_seconds(steps["parallel"]) / jobs),
                    "",
                ),
            ]:
                print(f"parallel / plain throughput, {what}: {ratio:.2f}x{target}")
            if "plain" in BUSY and "parallel" in BUSY:
                print(
                    "course-grade / plain CPU seconds per submission: "
                    f"{BUSY['parallel'] / BUSY['plain']:.2f}   (target <= 0.5)"
                )
    if "cluster" in times and "parallel" in times:
        added = (on_cluster.seconds - times["parallel"]) / n
        print(
            f"cluster path's added time per submission (vs the local pool, {jobs} workers "
            f"each): {added:+.2f} s   (aim < 0.2 s)"
        )
    if n > 10 and all(k in BUSY for k in ("parallel", "parallel, 10", "plain", "plain, 10")):
        # CPU paid once a run (templates, workers' and coordinator's start, the report) and
        # CPU each added submission costs: from the runs of n and of 10 submissions.
        added = {w: (BUSY[w] - BUSY[f"{w}, 10"]) / (n - 10) for w in ("parallel", "plain")}
        once = {w: BUSY[f"{w}, 10"] - 10 * added[w] for w in added}
        print(
            f"CPU each added submission: course-grade {added['parallel']:.2f} s, plain "
            f"{added['plain']:.2f} s ({added['parallel'] / added['plain']:.2f}); paid once a "
            f"run: {once['parallel']:.1f} s and {once['plain']:.1f} s (from {n} and 10 submissions)"
        )
    if t10 is not None and "parallel" in times:
        parallel_s = times["parallel"]
        print(
            f"time growth, parallel: 10 submissions {t10:.1f} s -> {n} submissions "
            f"{parallel_s:.1f} s ({parallel_s / t10:.2f}x for {n / 10:.0f}x the work)"
        )


if __name__ == "__main__":
    main()
