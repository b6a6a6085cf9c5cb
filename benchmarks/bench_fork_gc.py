"""What a kernel's full garbage collection costs when its template froze what it imported
(``gc.freeze``, as ``autograder.sandbox.kernel_template`` does) and when it did not.

For each way, a fresh process imports what a test kernel's template imports (ipykernel,
IPython, NumPy, torch, the bridge) and forks a child, as the template forks a kernel; the
child runs one full collection (``gc.collect()``, which a notebook, torch or a library may
call, and which Python runs itself once enough objects have lived long) and says how much
of the parent's memory it copied into its own (Private_Dirty, which its memory cgroup
counts) and the CPU it took. Side by side:

    .venv/bin/python benchmarks/bench_fork_gc.py
"""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import gc, os, sys, time
sys.path.insert(0, {root!r})
frozen = {frozen!r}
if frozen:
    gc.disable()  # as the template imports
from autograder.sandbox.kernel_template import PRELOAD
import importlib
for name in PRELOAD["test"]:
    importlib.import_module(name)
if frozen:
    gc.freeze()

def private_mb():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty"):
                return int(line.split()[1]) / 1024

pid = os.fork()
if pid == 0:
    gc.enable()
    before, start = private_mb(), time.process_time()
    gc.collect()
    cpu, after = time.process_time() - start, private_mb()
    print(f"{{gc.get_freeze_count()}} {{after - before:.1f}} {{cpu:.3f}}", flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def one(frozen: bool) -> tuple[int, float, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=ROOT, frozen=frozen)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.split()
    return int(out[0]), float(out[1]), float(out[2])


def main() -> None:
    print("A kernel forked from a template runs one full collection (gc.collect())")
    print(f"{'template':<34}{'frozen objects':>15}{'MB copied':>11}{'CPU s':>8}")
    rows = {}
    for frozen in (False, True):
        rows[frozen] = one(frozen)
        name = "froze its imports (gc.freeze)" if frozen else "did not freeze"
        count, copied, cpu = rows[frozen]
        print(f"{name:<34}{count:>15}{copied:>11.1f}{cpu:>8.3f}")
    (_, copied_then, cpu_then), (_, copied_now, cpu_now) = rows[False], rows[True]
    print(
        f"frozen / not: memory copied {copied_now / max(copied_then, 0.1):.2f}, "
        f"CPU {cpu_now / max(cpu_then, 1e-3):.2f}"
    )


if __name__ == "__main__":
    main()
