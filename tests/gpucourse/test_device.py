"""The device helper: cuda or cpu, and the Colab hint."""

import sys
import types

import pytest
import torch

from gpucourse import device as dev


def test_pick_device_follows_torch(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert dev.pick_device() == "cpu"
    assert "No GPU found" in capsys.readouterr().out


def test_colab_without_gpu_says_how_to_switch_one_on(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert dev.pick_device() == "cpu"
    assert "Runtime > Change runtime type > GPU" in capsys.readouterr().out


def test_quiet_pick_prints_nothing(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    dev.pick_device(verbose=False)
    assert capsys.readouterr().out == ""


def test_far_device_shows_the_same_device_error_without_a_gpu():
    far = dev.far_device("cpu")
    assert far == "meta"
    with pytest.raises(RuntimeError, match="device"):
        torch.ones(3, device=far) + torch.ones(3)
    assert dev.far_device("cuda") == "cuda"


@pytest.mark.gpu
def test_pick_device_finds_the_gpu(capsys):
    assert dev.pick_device() == "cuda"
    assert "Using the GPU" in capsys.readouterr().out


def test_the_gpu_checks_refuse_a_machine_without_a_gpu_and_say_so(tmp_path):
    """scripts/check-on-gpu, where CUDA is hidden: it says why and stops before any test."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [str(root / "scripts" / "check-on-gpu"), str(tmp_path / "out")],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "these checks need a CUDA GPU" in done.stdout + done.stderr
    assert not (tmp_path / "out" / "gpu-tests.log").exists()
