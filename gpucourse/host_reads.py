"""Which lines of a training loop read a tensor's value on the host: on a GPU, each such
line makes the CPU wait until the GPU has computed that value.

``find_host_reads(device)`` runs each line on a loss that lives on another device and
reports what happened:

- on a GPU, under ``torch.cuda.set_sync_debug_mode("error")``, PyTorch raises on a line
  that synchronizes (the mode is experimental and does not catch every operation);
- without one, on PyTorch's ``meta`` device, whose tensors have a shape but no value: a
  line that needs the value raises, because there is none to read.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass

import torch


def _print(loss):
    print(loss)


def _branch(loss):
    if loss < 0.1:  # a Python `if` needs a True or False on the host
        return "small"
    return "large"


def _running_total(loss):
    total = torch.zeros((), device=loss.device)
    total += loss.detach()
    return total


LINES = [
    ("loss.item()", lambda loss: loss.item()),
    ("float(loss)", lambda loss: float(loss)),
    ("print(loss)", _print),
    ("loss.cpu()", lambda loss: loss.cpu()),
    ("loss.detach().cpu().numpy()", lambda loss: loss.detach().cpu().numpy()),
    ("if loss < 0.1: ...", _branch),
    ("total += loss.detach()", _running_total),
]


@dataclass(frozen=True)
class Found:
    line: str
    reads: bool
    evidence: str  # what PyTorch said, or printed

    def sentence(self) -> str:
        verdict = "reads the value on the host" if self.reads else "stays on the device"
        return f"{self.line}: {verdict} ({self.evidence})"


def find_host_reads(device: str) -> list[Found]:
    """Runs each of ``LINES`` on a loss on the GPU (``device="cuda"``) or on ``meta``."""
    if device == "cuda":
        loss = torch.full((), 0.5, device="cuda")
        torch.cuda.synchronize()
        return [_on_gpu(line, run, loss) for line, run in LINES]
    loss = torch.empty((), device="meta")
    return [_on_meta(line, run, loss) for line, run in LINES]


# The one line that PyTorch's tuning guide does not list among the synchronizations.
STAYS = "total += loss.detach()"


def _on_gpu(line, run, loss) -> Found:
    with warnings.catch_warnings():
        # Its warning that it is a prototype and misses some is the caveat each Found already
        # states; shown raw, it would reach the learner as a stray stderr line.
        warnings.filterwarnings("ignore", "Synchronization debug mode is a prototype")
        torch.cuda.set_sync_debug_mode("error")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            run(loss)
    except RuntimeError as error:
        return Found(line, True, f"sync debug mode: {_short(error)}")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    if line != STAYS:
        # The mode does not see every synchronization: say so rather than call it free.
        return Found(
            line,
            True,
            "sync debug mode raised nothing, but it misses some; "
            "PyTorch's tuning guide lists this line as a synchronization",
        )
    return Found(line, False, "sync debug mode raised nothing")


def _on_meta(line, run, loss) -> Found:
    shown = io.StringIO()
    try:
        with contextlib.redirect_stdout(shown):
            run(loss)
    except (RuntimeError, NotImplementedError, TypeError) as error:
        return Found(line, True, f"on meta: {_short(error)}")
    if shown.getvalue().strip():
        # print() on meta shows "..." for the value, there being none. On a GPU it reads it.
        return Found(
            line,
            True,
            "on meta it printed no value, there being none; on a GPU "
            "it reads the value: PyTorch's tuning guide",
        )
    return Found(line, False, "ran on meta, which has no values: it read none")


def _short(error: Exception) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:90]
