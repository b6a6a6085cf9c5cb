"""Shared by every test: the repository root, and the GPU marker's skip rule."""

from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    # Playwright's sync API leaves its event loop marked as running in the main
    # thread, which would break later tests that run asyncio themselves: the browser
    # tests go last. The modules whose shared fixture grades a whole class go first, the
    # one with most tests first: under pytest-xdist (scripts/run-tests: -n 2 --dist
    # loadfile hands out files in this order) the longest start at once, the rest fill in.
    size = Counter(item.path for item in items)

    def order(item):
        first = "first" in item.keywords
        return ("browser" in item.keywords, not first, -size[item.path] if first else 0)

    items.sort(key=order)
    # A GPU test is skipped only where there is no GPU; everywhere else it runs.
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
