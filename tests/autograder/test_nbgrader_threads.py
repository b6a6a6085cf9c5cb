"""nbgrader's process-wide state under several grading threads of one worker (a Dask
worker with its default one thread per core)."""

from __future__ import annotations

import subprocess
import sys

# Two threads parse at once, with the thread switches that a garbage collection in the
# middle of building a tree allows (the collector runs Python callbacks). Without the
# lock, CPython 3.11 says "AST constructor recursion depth mismatch" within a few parses.
STRESS = """
import ast, gc, sys, threading, time
{install}
sys.setswitchinterval(1e-6)
gc.set_threshold(50, 1, 1)
gc.callbacks.append(lambda phase, info: time.sleep(0))
src = "\\n".join(
    f"def f{{i}}(a, b=[1, 2, {{{{3: 4}}}}]):\\n    return [x * y for x in a if x for y in b]"
    for i in range(100)
)
errors = []
def work():
    for _ in range(20):
        try:
            ast.parse(src)
            ast.literal_eval("[" + ", ".join(map(str, range(300))) + "]")
        except SystemError as exc:
            errors.append(str(exc))
            return
threads = [threading.Thread(target=work) for _ in range(2)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(errors), errors[:1])
"""


def _stress(install: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", STRESS.format(install=install)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def test_two_grading_threads_parse_python_without_crossing():
    """A worker's threads read test cells (the test plan) and the test kernel's replies
    (``literal_eval``) at once: after ``install`` no parse fails."""
    patched = _stress("from autograder.worker import nbgrader_threads; nbgrader_threads.install()")
    assert patched.startswith("0 "), patched
