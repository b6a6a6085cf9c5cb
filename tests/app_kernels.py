"""A kernel of one of the bridge's classes under a chosen application, outside any sandbox:
ipykernel's own (``ipykernel_launcher``) or the grading kernels' (``autograder.sandbox.kernel_app``).
For test_bridge_kernels and benchmarks/bench_kernel_messages.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from autograder.bridge import protocol
from autograder.sandbox import kernel_app

APPS = {"ipykernel": "ipykernel_launcher", "grading": kernel_app.__name__}
KINDS = {"student": protocol.STUDENT_KERNEL_OPTION, "test": protocol.TESTS_KERNEL_OPTION}


def start(folder: Path, app: str, kind: str):
    """(manager, ready client) of a ``kind`` kernel under ``app``, its kernelspec in ``folder``."""
    spec = folder / "kernels" / f"{app}-{kind}"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", APPS[app], "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    km = KernelManager(
        kernel_name=spec.name, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)])
    )
    km.start_kernel(extra_arguments=["--HistoryManager.hist_file=:memory:", KINDS[kind]])
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
    except Exception:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc
