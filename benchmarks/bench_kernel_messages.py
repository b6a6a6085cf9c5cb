"""A grading kernel's own CPU per request: ipykernel's application against the grading
kernels' (``autograder.sandbox.kernel_app``), side by side, for each kernel class.

Each way starts the kernel class under the application (no sandbox: what is measured is
the kernel's own handling of a message), imports torch in it, then sends N requests one
after another and reads the kernel process's CPU seconds (user and system, all its threads)
before and after:

  execute pass      an execute_request of ``pass``: the least a cell costs
  execute print     a cell that prints one line (a stream message and its flush)
  bridge call       (student kernel) a bridge request that calls a function of the notebook

    .venv/bin/python benchmarks/bench_kernel_messages.py            # N = 300
    .venv/bin/python benchmarks/bench_kernel_messages.py --n 1000

Run it alone on the machine: another job's processes make a kernel's CPU time noisier.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.bridge import plaindata, protocol  # noqa: E402
from tests import app_kernels  # noqa: E402

# Each application under its name in the table, and the name app_kernels knows it by.
APPS = {"ipykernel's app": "ipykernel", "grading app": "grading"}


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def execute(kc, code: str) -> None:
    reply = kc.execute_interactive(code, timeout=30, output_hook=lambda msg: None)
    assert reply["content"]["status"] == "ok", reply["content"]


def bridge_call(kc) -> None:
    request = kc.session.msg(
        protocol.REQUEST_MSG,
        {"prompt": protocol.call_request("double", [plaindata.encode(21)], [])},
    )
    kc.shell_channel.send(request)
    msg_id = request["header"]["msg_id"]
    while True:  # its idle status ends what the call sends (there is no shell reply)
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status":
            if msg["content"]["execution_state"] == "idle":
                break


def measure(folder: Path, app: str, kind: str, n: int) -> dict[str, float]:
    km, kc = app_kernels.start(folder, app, kind)
    try:
        process = psutil.Process(km.provisioner.process.pid)
        execute(kc, "import torch\ndef double(x):\n    return 2 * x")
        requests = {
            "execute pass": lambda: execute(kc, "pass"),
            "execute print": lambda: execute(kc, "print(1)"),
        }
        if kind == "student":
            requests["bridge call"] = lambda: bridge_call(kc)
        found = {}
        for label, send in requests.items():
            before = cpu(process)
            for _ in range(n):
                send()
            found[label] = (cpu(process) - before) / n * 1000
        return found
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300, help="requests of each kind (default 300)")
    args = parser.parse_args()
    print(f"A kernel's own CPU per request (ms, user + system, all its threads), {args.n} each")
    print(f"{'kernel':9}{'request':16}" + "".join(f"{app:>18}" for app in APPS) + "     ratio")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in app_kernels.KINDS:
            results = {label: measure(Path(tmp), app, kind, args.n) for label, app in APPS.items()}
            stock, grading = results.values()
            for label in stock:
                ratio = grading[label] / stock[label]
                print(f"{kind:9}{label:16}{stock[label]:18.2f}{grading[label]:18.2f}{ratio:10.2f}")


if __name__ == "__main__":
    main()
