"""The input pipeline's arithmetic (gpucourse.input_pipeline) and the image batches whose
CPU stages the lesson measures (gpucourse.image_batches)."""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gpucourse.image_batches import (
    MEAN,
    STD,
    SyntheticImages,
    channel_stats,
    measure_speeds,
    normalize,
)
from gpucourse.input_pipeline import Pipeline, Settings, Speeds, assumed_speeds


def scenario(load=5.0, copy=2.0, compute=8.0, cores=None) -> Speeds:
    """Stage times in ms for a float32 batch, whatever the settings: 1 MB a batch as uint8,
    so a pinned float32 copy at 2 GB/s takes 2 ms."""
    return Speeds(
        batch=1,
        uint8_bytes=1_000_000,
        load_ms=load,
        normalize_ms=0.0,
        pinned_gb_s=4 / copy,
        pageable_gb_s=4 / copy,
        compute_ms=compute,
        cores=cores,
    )


OVERLAPPED = dict(pinned=True, side_stream=True)


def per_batch(pipeline: Pipeline, batches: int = 200) -> float:
    """The simulated time between the last 100 steps' ends: the steady state, as scheduled."""
    ends = [s.end for s in pipeline.spans(batches) if s.stage == "compute"]
    return (ends[-1] - ends[-101]) / 100


def test_check_yourself_one_after_another_and_overlapped():
    sequential = Pipeline(scenario(), Settings(workers=0, **OVERLAPPED))
    assert sequential.steady_ms() == pytest.approx(15) and per_batch(sequential) == pytest.approx(
        15
    )
    assert sequential.gpu_busy() == pytest.approx(8 / 15)
    overlapped = Pipeline(scenario(), Settings(workers=1, **OVERLAPPED))
    assert overlapped.steady_ms() == pytest.approx(8) and per_batch(overlapped) == pytest.approx(8)
    assert overlapped.bottleneck() == "compute" and overlapped.gpu_busy() == pytest.approx(1)


def test_check_yourself_workers_move_the_bottleneck():
    one = Pipeline(scenario(load=12), Settings(workers=1, **OVERLAPPED))
    assert (one.steady_ms(), one.bottleneck()) == (pytest.approx(12), "load")
    two = one.with_settings(workers=2)
    assert (two.steady_ms(), two.bottleneck()) == (pytest.approx(8), "compute")
    assert per_batch(one) == pytest.approx(12) and per_batch(two) == pytest.approx(8)


@pytest.mark.parametrize("pinned, side_stream", [(False, False), (True, False), (False, True)])
def test_copy_and_step_share_a_stream_unless_pinned_on_a_side_stream(pinned, side_stream):
    pipeline = Pipeline(
        scenario(load=4), Settings(workers=2, pinned=pinned, side_stream=side_stream)
    )
    assert pipeline.steady_ms() == pytest.approx(10) == per_batch(pipeline)
    assert pipeline.bottleneck() == "copy + compute"
    spans = pipeline.spans(4)
    copies = [s for s in spans if s.stage == "copy"]
    steps = [s for s in spans if s.stage == "compute"]
    assert all(c.start >= s.end for c, s in zip(copies[1:], steps))  # in order on one stream


def test_pageable_copies_are_slower_and_uint8_moves_a_quarter_of_the_bytes():
    speeds = assumed_speeds()
    floats = Pipeline(speeds, Settings(dtype="float32"))
    assert floats.batch_bytes() == 256 * 3 * 224 * 224 * 4 == 154_140_672
    assert floats.copy_ms() == pytest.approx(154.140672 / 25_000 * 1e3 * 2)  # pageable: half speed
    pinned = floats.with_settings(pinned=True)
    assert pinned.copy_ms() == pytest.approx(6.16562688)
    assert pinned.with_settings(dtype="uint8").copy_ms() == pytest.approx(6.16562688 / 4)
    # float32 batches are normalized by the loader; uint8 ones on the GPU.
    assert floats.load_ms() == speeds.load_ms + speeds.normalize_ms
    assert floats.with_settings(dtype="uint8").load_ms() == speeds.load_ms


def test_more_workers_than_cores_share_them():
    pipeline = Pipeline(scenario(load=12, cores=2), Settings(workers=4, **OVERLAPPED))
    assert pipeline.stage_ms()["load"] == pytest.approx(6)  # 2 cores: 2 batches per 12 ms
    assert per_batch(pipeline) == pytest.approx(8)


def test_workers_take_batches_in_turn_and_prefetch_at_most_two_each():
    spans = Pipeline(scenario(load=1, compute=50), Settings(workers=2, **OVERLAPPED)).spans(12)
    loads = [s for s in spans if s.stage == "load"]
    assert [s.row for s in loads] == [0, 1] * 6
    copies = {s.batch: s.start for s in spans if s.stage == "copy"}
    for load in loads[4:]:  # batch i waits until batch i - 4 has been taken by the loop
        assert load.start >= copies[load.batch - 4]


def test_bad_settings_and_speeds_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="workers"):
        Settings(workers=-1)
    with pytest.raises(ValueError, match="dtype"):
        Settings(dtype="float16")
    with pytest.raises(ValueError, match="load_ms"):
        scenario(load=math.nan)
    with pytest.raises(ValueError, match="batches"):
        Pipeline(scenario(), Settings()).spans(0)


def test_synthetic_images_are_uint8_crops_made_from_their_index():
    data = SyntheticImages(length=4)
    first = data[0]
    assert first.shape == (3, 224, 224) and first.dtype == torch.uint8
    assert torch.equal(first, data[0]) and not torch.equal(first, data[1])
    with pytest.raises(IndexError):
        data[4]


def test_normalize_matches_the_formula_on_cpu_and_keeps_the_device_on_meta():
    images = torch.randint(0, 256, (2, 3, 4, 5), dtype=torch.uint8)
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    assert torch.allclose(normalize(images), (images.float() / 255 - mean) / std)
    on_meta = normalize(images.to("meta"))
    assert (on_meta.device.type, on_meta.dtype, on_meta.shape) == (
        "meta",
        torch.float32,
        images.shape,
    )


class _Crossings(TorchDispatchMode):
    """Records each operation that takes a CPU tensor and makes one on another device."""

    def __init__(self):
        super().__init__()
        self.copies = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = [a.device.type for a in args if isinstance(a, torch.Tensor)]
        if "cpu" in inputs and isinstance(out, torch.Tensor) and out.device.type != "cpu":
            self.copies.append(str(func))
        return out


def test_channel_stats_copy_once_and_normalize_then_copies_nothing_per_batch():
    """On `meta`, standing in for a GPU: the mean and std are built on the CPU and copied, two
    copies in all, once; normalizing any number of batches with them crosses no link."""
    with _Crossings() as made:
        stats = channel_stats("meta")
    assert made.copies == ["aten._to_copy.default"] * 2
    assert [(s.device.type, s.dtype, tuple(s.shape)) for s in stats] == [
        ("meta", torch.float32, (1, 3, 1, 1))
    ] * 2
    batch = torch.zeros(4, 3, 8, 8, dtype=torch.uint8, device="meta")
    with _Crossings() as loop:
        for _ in range(3):
            out = normalize(batch, stats)
    assert loop.copies == [] and (out.device.type, out.dtype, out.shape) == (
        "meta",
        torch.float32,
        batch.shape,
    )
    with _Crossings() as unprepared:  # without stats, each call makes (and copies) its own
        normalize(batch)
    assert unprepared.copies == ["aten._to_copy.default"] * 2
    images = torch.randint(0, 256, (2, 3, 4, 5), dtype=torch.uint8)
    assert torch.equal(normalize(images, channel_stats("cpu")), normalize(images))
    assert torch.equal(
        normalize(images[0], channel_stats("cpu")), normalize(images)[0]
    )  # one image, (C, H, W)


def test_each_stage_line_gives_its_figure_its_batch_and_its_source():
    speeds = assumed_speeds()
    assert (
        speeds.stage_line("load")
        == "load: 20 ms for one worker to load a batch of 256 (made up: 20 ms for one worker to load a batch)"
    )
    assert speeds.stage_line("normalize").startswith(
        "normalize: 6 ms more to make a batch of 256 float32 (made up"
    )
    assert speeds.stage_line("copy").startswith(
        "copy: 25 GB/s from pinned memory, 12.5 GB/s from pageable: 1.54 ms for the 38.5 MB of a batch "
        "of 256 as uint8, from pinned memory (assumed: 25 GB/s"
    )
    assert (
        speeds.stage_line("compute")
        == "compute: 8 ms for the GPU's step on a batch of 256 (made up: an 8 ms step on the GPU)"
    )
    with pytest.raises(ValueError, match="stage must be one of"):
        speeds.stage_line("decode")


def test_measured_speeds_on_the_cpu_measure_the_cpu_and_assume_the_rest():
    speeds = measure_speeds("cpu", batch=4, min_run_time=0.01)
    assert (
        speeds.uint8_bytes == 4 * 3 * 224 * 224 and speeds.load_ms > 0 and speeds.normalize_ms > 0
    )
    assert speeds.said("load").startswith("measured here") and speeds.said("normalize").startswith(
        "measured"
    )
    assert speeds.said("copy").startswith("assumed (no GPU here)")
    assert speeds.said("compute").startswith("assumed (no GPU here)")


@pytest.mark.gpu
def test_measured_speeds_on_a_gpu_measure_every_stage():
    speeds = measure_speeds("cuda", batch=4, min_run_time=0.05)
    assert all(
        speeds.said(stage).startswith("measured here")
        for stage in ("load", "normalize", "copy", "compute")
    )
    assert speeds.pinned_gb_s > 0 and speeds.pageable_gb_s > 0 and speeds.compute_ms > 0
