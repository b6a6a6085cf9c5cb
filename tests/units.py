"""The course's units, in course order, and where each one's files are: the one list the
tests parametrize over. The order is ``[tool.gpucourse] units`` in pyproject.toml, which
scripts/sync-links also reads for the README's table of units.

Each unit has a submissions module for the grading tests, ``submissions_<unit>``, with the
same API (see tests/submissions_gpu_tensors.py).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]

with open(ROOT / "pyproject.toml", "rb") as _file:
    UNITS: list[str] = list(tomllib.load(_file)["tool"]["gpucourse"]["units"])


def lesson(unit: str) -> Path:
    return ROOT / "notebooks" / f"{unit}.ipynb"


def source(unit: str) -> Path:
    return ROOT / "source" / unit / f"{unit}.ipynb"


def release(unit: str) -> Path:
    return ROOT / "release" / unit / f"{unit}.ipynb"


def submissions(unit: str):
    """The unit's submissions module (solutions, mistakes, expected scores)."""
    return importlib.import_module(f"submissions_{unit}")
