"""Which device the lesson runs on, and what to tell a learner who has no GPU."""

from __future__ import annotations

import sys

COLAB_HOW_TO = (
    "This Colab runtime has no GPU. To switch one on: Runtime > Change runtime "
    "type > GPU (for example T4) > Save, then run the notebook again from the top."
)
NO_GPU = (
    "No GPU found, so the lesson runs on the CPU. Every cell still works; "
    "the GPU-only measurements say what they would show."
)


def on_colab() -> bool:
    return "google.colab" in sys.modules


def pick_device(verbose: bool = True) -> str:
    """``"cuda"`` when PyTorch finds a GPU, ``"cpu"`` otherwise, like the seed's
    one-liner; with ``verbose`` it also says what it found and, on Colab, how to get a GPU."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if verbose:
        print(describe(device))
    return device


def describe(device: str) -> str:
    if device == "cuda":
        import torch

        return f"Using the GPU: {torch.cuda.get_device_name(0)}."
    return COLAB_HOW_TO if on_colab() else NO_GPU


def far_device(device: str) -> str:
    """A device other than the CPU, to show the same-device error: the GPU if there is
    one, else PyTorch's ``meta`` device (tensors with a shape but no data), which
    enforces the same rule without any hardware."""
    return "cuda" if device == "cuda" else "meta"
