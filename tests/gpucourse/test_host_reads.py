"""Which lines of a training loop read a value on the host: found by running them."""

import pytest

from gpucourse.host_reads import LINES, find_host_reads

STAYS = {"total += loss.detach()"}


def test_on_meta_every_read_is_found_and_the_running_total_stays():
    found = find_host_reads("cpu")
    assert [f.line for f in found] == [line for line, _ in LINES]
    assert {f.line for f in found if not f.reads} == STAYS
    for f in found:
        assert f.evidence.startswith("on meta") or f.evidence.startswith("ran on meta")
    text = "\n".join(f.sentence() for f in found)
    assert (
        "loss.item(): reads the value on the host (on meta: Tensor.item() cannot be called" in text
    )
    assert "print(loss): reads the value on the host (on meta it printed no value" in text


def test_a_line_that_reads_nothing_is_not_reported_as_a_read(monkeypatch):
    import gpucourse.host_reads as module

    monkeypatch.setattr(module, "LINES", [("loss * 2", lambda loss: loss * 2)])
    (found,) = module.find_host_reads("cpu")
    assert not found.reads


@pytest.mark.gpu
def test_on_a_gpu_sync_debug_mode_finds_the_waits():
    import torch

    found = find_host_reads("cuda")
    assert {f.line for f in found if not f.reads} == STAYS
    assert all("sync debug mode" in f.evidence for f in found)
    assert torch.cuda.get_sync_debug_mode() == 0  # set back


def test_on_a_gpu_a_line_the_debug_mode_misses_is_not_called_free(monkeypatch):
    """The debug mode does not see every synchronization: only the running total, which the
    tuning guide does not list, may be reported as staying on the device."""
    import torch

    import gpucourse.host_reads as module

    modes = []
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    loss = torch.tensor(0.5)  # stands in for a GPU loss; no mode is really set
    found = [module._on_gpu(line, run, loss) for line, run in module.LINES]
    assert {f.line for f in found if not f.reads} == STAYS
    assert all("misses some" in f.evidence for f in found if f.reads)
    assert modes == ["error", "default"] * len(module.LINES)

    def syncs(loss):
        raise RuntimeError("called a synchronizing CUDA operation")

    caught = module._on_gpu("loss.item()", syncs, loss)
    assert (
        caught.reads and caught.evidence == "sync debug mode: called a synchronizing CUDA operation"
    )
