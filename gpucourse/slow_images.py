"""A small image data set that is slow to load on purpose, for the profiling lesson.

``SlowImages()[i]`` makes image ``i`` (3×32×32, uint8, as an image file holds it) and its
label from the index, then "decodes" it: ``decode_rounds`` passes of a small blur, the work
a real loader spends decoding and augmenting a file. Nothing is downloaded. It lives in a
module, not in the notebook, so that ``DataLoader`` workers can load it however they start
(fork on Linux, spawn on macOS and Windows).
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

SIZE = 32
CLASSES = 10


class SlowImages(Dataset):
    def __init__(self, length: int = 512, decode_rounds: int = 12):
        self.length, self.decode_rounds = length, decode_rounds

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if not 0 <= index < self.length:
            raise IndexError(index)
        generator = torch.Generator().manual_seed(index)
        image = torch.rand(3, SIZE, SIZE, generator=generator)
        for _ in range(self.decode_rounds):  # the "decoding": a 3×3 blur, again and again
            image = torch.nn.functional.avg_pool2d(image[None], 3, stride=1, padding=1)[0]
        label = int(torch.randint(CLASSES, (), generator=generator))
        return (image * 255).to(torch.uint8), label


def small_network(seed: int = 0) -> torch.nn.Module:
    """A small classifier for SlowImages: 3×32×32 images in, 10 classes out."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(3 * SIZE * SIZE, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES),
    )
