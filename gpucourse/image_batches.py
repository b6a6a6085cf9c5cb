"""Batches of images made on the CPU, and what each stage of feeding them to a device costs
here, measured with ``torch.utils.benchmark``.

``SyntheticImages`` stands in for a folder of photos: each item is a 3×256×256 uint8 image
made from its index (the work of decoding a file), randomly cropped to 224×224 and flipped
(the work of augmenting it). Nothing is downloaded.

``measure_speeds(device)`` times, on one CPU thread as one loader worker has, loading a
batch and normalizing it to float32; on a GPU also the copies from pageable and from
pinned memory, and a step of a small network on the batch. Without a GPU, the copy and
the step are assumed, and every figure's ``source`` says which is which.
"""

from __future__ import annotations

import os

import torch
from torch.utils import benchmark
from torch.utils.data import Dataset, default_collate

from .input_pipeline import CHANNELS, LINK_GB_S, SIDE, Speeds

STORED = 256  # the side of a stored image, before the crop
MEAN = (0.485, 0.456, 0.406)  # per-channel mean and std of ImageNet, as torchvision's models use
STD = (0.229, 0.224, 0.225)
BATCH = 64
ASSUMED_STEP_MS_PER_IMAGE = 8.0 / 256  # the scenario's made-up 8 ms for 256 images


class SyntheticImages(Dataset):
    """``length`` RGB images as uint8, made from their index: decoding and augmenting
    without files."""

    def __init__(self, length: int = 10_000, side: int = SIDE, seed: int = 0):
        if length < 1 or side < 1 or side > STORED:
            raise ValueError(f"SyntheticImages: need length >= 1 and 1 <= side <= {STORED}")
        self.length, self.side, self.seed = length, side, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> torch.Tensor:
        if not 0 <= index < self.length:
            raise IndexError(index)
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        image = torch.randint(
            0, 256, (CHANNELS, STORED, STORED), dtype=torch.uint8, generator=generator
        )  # "decode"
        top, left = (
            int(v) for v in torch.randint(0, STORED - self.side + 1, (2,), generator=generator)
        )
        image = image[:, top : top + self.side, left : left + self.side]  # random crop
        if torch.rand((), generator=generator) < 0.5:
            image = image.flip(-1)  # random flip
        return image.contiguous()


def channel_stats(device, mean=MEAN, std=STD) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-channel mean and std as float32 tensors of shape (1, C, 1, 1) on ``device``.

    Make them once, before the loop, and pass them to every ``normalize`` call. Whatever the
    ``device`` argument says, ``torch.tensor(...)`` builds its tensor on the CPU from the
    Python numbers and then copies it to the device: on a GPU, from pageable memory, a copy
    the CPU waits for (PyTorch's ``torch/csrc/utils/tensor_new.cpp``). Made once, that is two
    small copies in all; made inside the loop, two hidden waits a batch."""
    shape = (1, -1, 1, 1)
    return (
        torch.tensor(mean, dtype=torch.float32).view(shape).to(device),  # built on the CPU,
        torch.tensor(std, dtype=torch.float32).view(shape).to(device),
    )  # then copied once


def normalize(
    images: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor] | None = None
) -> torch.Tensor:
    """uint8 images (N, C, H, W) or (C, H, W) -> float32 in [0, 1], then per channel
    (x - mean) / std, on whatever device the images are.

    ``stats`` is ``channel_stats(device)``, made once before the loop: then a call copies
    nothing between devices. Without it the call makes its own, which is free on the CPU
    but two small copies (and waits) on a GPU, every call."""
    mean, std = stats if stats is not None else channel_stats(images.device)
    if images.dim() == 3:
        mean, std = mean.view(-1, 1, 1), std.view(-1, 1, 1)
    return (images.float() / 255 - mean) / std


def cpu_cores() -> int:
    """The CPU cores this process may run on (what loader workers share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def ms(stmt: str, env: dict, min_run_time: float = 0.2, threads: int = 1) -> float:
    """Median milliseconds of ``stmt`` with torch.utils.benchmark (warm-up, repeats, and on
    a GPU a synchronize before the clock is read)."""
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


def measure_speeds(device: str, batch: int = BATCH, min_run_time: float = 0.2) -> Speeds:
    """Each stage of one batch of ``batch`` images, measured where this machine can."""
    data = SyntheticImages()
    env = {
        "data": data,
        "collate": default_collate,
        "normalize": normalize,
        "batch": batch,
        "stats": channel_stats("cpu"),
    }
    load = ms("collate([data[i] for i in range(batch)])", env, min_run_time)
    images = default_collate([data[i] for i in range(batch)])
    env["images"] = images
    norm = ms("normalize(images, stats)", env, min_run_time)
    uint8_bytes = images.nelement() * images.element_size()
    cores = cpu_cores()
    source = [
        ("load", f"measured here: one worker (one CPU thread) loads a batch of {batch}"),
        ("normalize", "measured here: converting and normalizing it on one CPU thread"),
    ]
    if device == "cuda":
        pinned_images = images.pin_memory()
        env.update(
            pinned=pinned_images,
            floats=normalize(images),
            pinned_floats=normalize(images).pin_memory(),
            step=_small_step(batch),
        )
        pageable_gb_s = uint8_bytes * 4 / (ms("floats.to('cuda')", env, min_run_time) * 1e6)
        pinned_gb_s = uint8_bytes * 4 / (ms("pinned_floats.to('cuda')", env, min_run_time) * 1e6)
        env["on_gpu"] = pinned_images.to("cuda")
        compute = ms("step(on_gpu)", env, min_run_time, threads=torch.get_num_threads())
        source += [
            (
                "copy",
                "measured here: float32 batches from pageable and from pinned memory "
                "(pinned beforehand; pinning not counted)",
            ),
            ("compute", "measured here: a small network's training step on the batch, on the GPU"),
        ]
        name = "measured on this machine"
    else:
        pinned_gb_s, pageable_gb_s = LINK_GB_S, LINK_GB_S / 2
        compute = ASSUMED_STEP_MS_PER_IMAGE * batch
        source += [
            (
                "copy",
                f"assumed (no GPU here): {LINK_GB_S:g} GB/s from pinned memory, the "
                "first unit's PCIe 4.0 x16 figure; made up: half that from pageable memory",
            ),
            ("compute", f"assumed (no GPU here): a made-up {compute:g} ms step on the GPU"),
        ]
        name = "CPU stages measured here; copy and GPU step assumed"
    return Speeds(
        batch=batch,
        uint8_bytes=uint8_bytes,
        load_ms=load,
        normalize_ms=norm,
        pinned_gb_s=pinned_gb_s,
        pageable_gb_s=pageable_gb_s,
        compute_ms=compute,
        cores=cores,
        source=tuple(source),
        name=name,
    )


def _small_step(batch: int):
    """A training step of a small convolutional network on a normalized batch, on the GPU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    ).to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    labels = torch.randint(0, 10, (batch,), device="cuda")
    stats = channel_stats("cuda")  # once, before the steps: no copy inside a step

    def step(images):
        loss = torch.nn.functional.cross_entropy(model(normalize(images, stats)), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def copy_lines(device: str, images: torch.Tensor, min_run_time: float = 0.2) -> list[str]:
    """On a GPU: the batch as float32 copied from pageable memory, from memory pinned
    beforehand, and pinned then copied, each measured. Without one: what it would measure."""
    floats = normalize(images)
    size = f"{floats.nelement() * floats.element_size() / 1e6:.3g} MB"  # of this batch, as float32
    if device != "cuda":
        return [
            f"No GPU here: nothing to copy to, so no copy is timed. On a GPU this cell times "
            f"the {size} float32 batch of {len(images)} images copied from pageable memory, "
            "from pinned memory, and pinned then copied."
        ]
    env = {"floats": floats, "pinned": floats.pin_memory()}
    lines = []
    for what, stmt in [
        ("from pageable memory, floats.to('cuda')", "floats.to('cuda')"),
        ("from pinned memory (pinned beforehand)", "pinned.to('cuda')"),
        ("pinned, then copied, floats.pin_memory().to('cuda')", "floats.pin_memory().to('cuda')"),
    ]:
        took = ms(stmt, env, min_run_time)
        lines.append(
            f"copy {size} ({len(images)} images as float32) {what}: {took:.3f} ms, {floats.nelement() * 4 / took / 1e6:.1f} GB/s (measured)"
        )
    return lines
