"""Where course-grade's CPU goes, by process: BSD process accounting over one run.

Grades N honest submissions of gpu_tensors (as bench_grading.py does) with
``course-grade --jobs J`` while the kernel's process accounting (``accton``) records every
process that ends, then sums their CPU by what each process is, told from its uid, whether
it was forked without an exec, and its parent:

  kernels            forked children of a template, and whatever they started (per slot uid)
  templates          the exec'd kernel templates, one per kind per worker (each imports torch)
  workers            the pool's workers (nbgrader's steps, the kernels' clients)
  feedback pages     children a worker forks for each page
  relays             each student kernel's relay, forked from its worker's relay server
  relay servers      one a worker: imports zmq once, forks every relay
  coordinator        course-grade itself
  the rest           fork server, resource tracker, bubblewrap

    .venv/bin/python benchmarks/cpu_by_process.py            # 30 submissions, --jobs <cpus>
    .venv/bin/python benchmarks/cpu_by_process.py --n 10     # a run's once-paid part shows more

Needs root, bwrap (as course-grade does) and Debian's ``acct`` (``accton``, ``dump-acct``).
Run it alone on the machine: accounting records every process that ends meanwhile.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from bench_grading import ASSIGNMENT, make_class  # noqa: E402

from autograder.worker.worker import TEST_UID_OFFSET  # noqa: E402

HZ = 100  # dump-acct's times are in AHZ ticks, 100 on Linux


def records(path: Path) -> list[dict]:
    """One dict per ended process: comm, cpu (s), elapsed (s), uid, pid, ppid, forked."""
    out = subprocess.run(["dump-acct", str(path)], capture_output=True, text=True, check=True)
    rows = []
    for line in out.stdout.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 12 or f[1] != "v3":
            continue
        rows.append(
            {
                "comm": f[0],
                "cpu": (float(f[2]) + float(f[3])) / HZ,
                "elapsed": float(f[4]) / HZ,
                "uid": int(f[5]),
                "pid": int(f[9]),
                "ppid": int(f[10]),
                "forked": "F" in f[11],
            }
        )
    return rows


def classify(rows: list[dict], run_seconds: float) -> dict[str, list[dict]]:
    by_pid = {r["pid"]: r for r in rows}
    kinds: dict[str, list[dict]] = collections.defaultdict(list)
    kernel_uids = sorted({r["uid"] for r in rows if r["uid"] != 0})
    first = kernel_uids[0] if kernel_uids else 0
    workers = {  # long-lived forks of root: the pool's workers (a sandbox's bwrap aside)
        r["pid"]
        for r in rows
        if r["uid"] == 0
        and r["forked"]
        and r["elapsed"] > 0.5 * run_seconds
        and not r["comm"].startswith("bwrap")
        and r["ppid"] != 2  # the kernel's own threads (kthreadd's)
    }
    fork_servers = {by_pid[pid]["ppid"] for pid in workers}
    forkers = {r["ppid"] for r in rows if r["forked"]}
    servers = {  # each worker's relay server: exec'd by the worker, forks every relay
        r["pid"]
        for r in rows
        if r["uid"] == 0
        and not r["forked"]
        and r["comm"] not in ("bwrap", "course-grade")
        # (a server that ended after its worker is recorded as init's child)
        and (r["ppid"] in workers or (r["ppid"] == 1 and r["pid"] in forkers))
        and r["pid"] not in fork_servers
    }
    for r in rows:
        if r["comm"] == "accton" or r["ppid"] == 2:
            continue  # ours, and the kernel's own threads
        if r["uid"] != 0:
            side = "test" if r["uid"] >= first + TEST_UID_OFFSET else "student"
            parent = by_pid.get(r["ppid"]) or {"uid": 0, "comm": ""}
            if r["comm"].startswith("bwrap") or r["comm"] in ("true", "uname"):
                kinds["the rest"].append(r)  # the sandbox's own start
            elif r["forked"] or (parent["uid"] != 0 and not parent["comm"].startswith("bwrap")):
                kinds[f"kernels ({side})"].append(r)  # a template's child, or one's program
            else:
                kinds[f"templates ({side})"].append(r)
        elif r["comm"] == "course-grade":
            kinds["coordinator"].append(r)
        elif r["pid"] in workers:
            kinds["workers"].append(r)
        elif r["ppid"] in workers and r["forked"]:
            kinds["feedback pages"].append(r)
        elif r["pid"] in servers:
            kinds["relay servers"].append(r)
        elif r["ppid"] in servers and r["forked"]:
            kinds["relays"].append(r)
        else:
            kinds["the rest"].append(r)
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=30, help="submissions (default 30)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if shutil.which("accton") is None or shutil.which("dump-acct") is None:
        raise SystemExit("needs Debian's acct package: apt-get install acct")
    if os.geteuid() != 0:
        raise SystemExit("needs root (process accounting, and course-grade's sandbox)")
    base = Path(tempfile.mkdtemp(prefix="cpu-by-process-"))
    try:
        course = make_class(args.n, base)
        account = base / "pacct"
        account.touch()
        subprocess.run(["accton", str(account)], check=True, capture_output=True)
        start = time.perf_counter()
        try:
            result = subprocess.run(
                [
                    str(Path(sys.executable).parent / "course-grade"),
                    ASSIGNMENT,
                    "--course",
                    str(course),
                    "--jobs",
                    str(args.jobs),
                    "--no-progress",
                ],
                capture_output=True,
                text=True,
            )
        finally:
            subprocess.run(["accton", "off"], check=True, capture_output=True)
        seconds = time.perf_counter() - start
        if result.returncode not in (0, 1):
            raise SystemExit(f"course-grade failed:\n{result.stderr[-2000:]}")
        kinds = classify(records(account), seconds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    total = sum(r["cpu"] for rs in kinds.values() for r in rs)
    print(
        f"\ncourse-grade --jobs {args.jobs} on {args.n} submissions of {ASSIGNMENT}: "
        f"{seconds:.1f} s, {total:.1f} CPU s in all ({total / args.n:.2f} a submission)"
    )
    print(f"{'what':22s} {'processes':>9s} {'CPU s':>8s} {'a submission':>13s} {'each':>7s}")
    for kind, rs in sorted(kinds.items(), key=lambda kv: -sum(r["cpu"] for r in kv[1])):
        cpu = sum(r["cpu"] for r in rs)
        print(f"{kind:22s} {len(rs):9d} {cpu:8.2f} {cpu / args.n:13.3f} {cpu / len(rs):7.3f}")


if __name__ == "__main__":
    main()
