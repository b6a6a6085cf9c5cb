"""The submissions waiting in ``submitted/``: which students, their content hash, and
whether each holds a notebook nbgrader can run at all."""
from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat

from autograder.fates import INVALID_NOTEBOOK, NO_NOTEBOOK


def expected_notebooks(course_root: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (course_root / "source" / assignment).glob("*.ipynb"))


def submitted_students(course_root: Path, assignment: str) -> list[str]:
    return sorted(p.parent.name for p in (course_root / "submitted").glob(f"*/{assignment}")
                  if p.is_dir())


def digest(folder: Path) -> str:
    """A hash of every file's name and bytes: changes exactly when the submission does."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def problem(folder: Path, notebooks: list[str]) -> tuple[str, str] | None:
    """(fate, message) when the submission cannot be graded, else None."""
    found = sorted(p.name for p in folder.glob("*.ipynb"))
    for name in notebooks:
        path = folder / name
        if not path.exists():
            others = f"; found {', '.join(found)}" if found else "; the folder has no notebook"
            return NO_NOTEBOOK, f"expected {name}{others}"
        if path.stat().st_size == 0:
            return INVALID_NOTEBOOK, f"{name} is an empty file"
        try:
            nb = nbformat.read(path, as_version=4)
            nbformat.validate(nb)
        except Exception as exc:  # nbformat raises several kinds; all mean "not a notebook"
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return INVALID_NOTEBOOK, f"{name} is not a valid notebook: {first_line[:200]}"
    return None
