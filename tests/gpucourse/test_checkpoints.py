"""Checkpoints in memory, and one as a GPU saves it, loaded on this machine."""

import pytest
import torch

from gpucourse.checkpoints import save_state, saved_on_gpu


def model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.BatchNorm1d(4))


def test_save_state_round_trips_parameters_and_buffers():
    source = model(1)
    source(torch.randn(8, 2))  # moves batch norm's running statistics
    target = model(2)
    target.load_state_dict(torch.load(save_state(source)))
    for name, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], value), name


def test_a_checkpoint_saved_on_a_gpu_records_cuda_for_every_tensor():
    """Its storages are restored on the device each one records: every one asks for cuda:0."""
    asked = []

    def record(storage, location):
        asked.append(location)
        return storage

    state = torch.load(saved_on_gpu(model()), map_location=record)
    assert len(asked) == len(state) and set(asked) == {"cuda:0"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the checkpoint loads")
def test_without_a_gpu_it_needs_map_location_and_then_loads_exactly():
    source = model(3)
    with pytest.raises(RuntimeError, match="deserialize object on a CUDA device"):
        torch.load(saved_on_gpu(source))
    for device in ("cpu", torch.device("cpu"), "meta"):
        state = torch.load(saved_on_gpu(source), map_location=device)
        assert {t.device.type for t in state.values()} == {torch.device(device).type}
    state = torch.load(saved_on_gpu(source), map_location="cpu")
    assert all(torch.equal(state[k], v) for k, v in source.state_dict().items())


@pytest.mark.gpu
def test_with_a_gpu_it_is_saved_from_the_gpu_and_loads_there():
    state = torch.load(saved_on_gpu(model(4)))
    assert {t.device.type for t in state.values()} == {"cuda"}
