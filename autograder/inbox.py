"""The submissions waiting in ``submitted/``: which students, their content hash, and
whether each holds a notebook nbgrader can grade at all.

Everything in a submission folder is the student's: it is read through
``autograder.safefiles`` (no link followed, no FIFO opened, sizes bounded), and a notebook
whose nbgrader metadata nbgrader would choke on gets the fate "invalid notebook" with the
reason, instead of reaching nbgrader and failing as the grader's own error.
"""
from __future__ import annotations

import hashlib
import numbers
import re
from pathlib import Path

import nbformat

from autograder import safefiles
from autograder.config import file_limits
from autograder.fates import INVALID_NOTEBOOK, NO_NOTEBOOK

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# nbgrader's own cell names (feedback pages print them unescaped): letters, digits, _ and -.
GRADE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
FLAGS = ("grade", "solution", "locked", "task")
SCHEMA_VERSION = 3


def valid_student_id(name: str) -> bool:
    """A plain identifier: letters, digits, '.', '_' and '-', not starting with a dot."""
    return bool(STUDENT_ID.match(name)) and ".." not in name


def expected_notebooks(course_root: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (course_root / "source" / assignment).glob("*.ipynb"))


def submitted_students(course_root: Path, assignment: str) -> list[str]:
    found = []
    for path in sorted((course_root / "submitted").glob(f"*/{assignment}")):
        if path.parent.is_symlink() or path.is_symlink() or not path.is_dir():
            continue
        found.append(path.parent.name)
    return found


def read_submission(folder: Path, config) -> tuple[dict[str, bytes], list[str]]:
    """The submission's regular files, and what was refused (links, FIFOs, files over
    nbgrader's ``CourseDirectory.max_file_size``, folders over ``max_dir_size``)."""
    return safefiles.regular_files(folder, *file_limits(config))


def digest(files: dict[str, bytes], refused: list[str]) -> str:
    """A hash of every file's name and bytes: changes exactly when the submission does."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    for line in refused:
        h.update(b"refused\0" + line.encode())
    return h.hexdigest()


def problem(files: dict[str, bytes], refused: list[str], notebooks: list[str],
            source_cells: dict[str, dict]) -> tuple[str, str] | None:
    """(fate, message) when the submission cannot be graded, else None.

    ``source_cells``: grade_id -> nbgrader metadata of the source notebook's cells.
    """
    if refused:
        return INVALID_NOTEBOOK, "the submission holds what the grader will not open: " \
            + "; ".join(refused[:3])
    found = sorted(n for n in files if n.endswith(".ipynb") and "/" not in n)
    for name in notebooks:
        if name not in files:
            others = f"; found {', '.join(found)}" if found else "; the folder has no notebook"
            return NO_NOTEBOOK, f"expected {name}{others}"
        if not files[name].strip():
            return INVALID_NOTEBOOK, f"{name} is an empty file"
        try:
            nb = nbformat.reads(files[name].decode("utf-8"), as_version=4)
            nbformat.validate(nb)
        except Exception as exc:  # nbformat raises several kinds; all mean "not a notebook"
            text = str(exc).strip()
            first_line = text.splitlines()[0] if text else type(exc).__name__
            return INVALID_NOTEBOOK, f"{name} is not a valid notebook: {first_line[:200]}"
        bad = metadata_problem(nb, source_cells)
        if bad:
            return INVALID_NOTEBOOK, f"{name}: {bad}"
    return None


def source_cells(course_root: Path, assignment: str) -> dict[str, dict]:
    """grade_id -> nbgrader metadata, for every nbgrader cell of the source notebooks."""
    cells = {}
    for name in expected_notebooks(course_root, assignment):
        nb = nbformat.read(course_root / "source" / assignment / name, as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if isinstance(meta, dict) and meta.get("grade_id"):
                cells[meta["grade_id"]] = {**meta, "cell_type": cell.cell_type}
    return cells


def metadata_problem(nb, source: dict[str, dict]) -> str | None:
    """Why nbgrader could not grade this notebook's cell metadata, or None."""
    for number, cell in enumerate(nb.cells, start=1):
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        where = f"cell {number}"
        if not isinstance(meta, dict):
            return f"{where} has nbgrader metadata that is not a mapping (was it edited by hand?)"
        if "schema_version" in meta and meta["schema_version"] != SCHEMA_VERSION:
            return f"{where} has nbgrader metadata of another version ({meta['schema_version']!r})"
        for flag in FLAGS:
            if flag in meta and not isinstance(meta[flag], bool):
                return f"{where}: nbgrader's '{flag}' must be true or false"
        if "points" in meta and (isinstance(meta["points"], bool)
                                 or not isinstance(meta["points"], numbers.Real)
                                 or meta["points"] < 0):
            return f"{where}: nbgrader's 'points' must be a number"
        grade_id = meta.get("grade_id")
        if grade_id is not None and not (isinstance(grade_id, str) and GRADE_ID.match(grade_id)):
            return f"{where} has an nbgrader cell name that is not a plain name"
        if not any(meta.get(flag) for flag in FLAGS):
            continue
        if not isinstance(grade_id, str):
            return f"{where} is an nbgrader cell without a name (grade_id)"
        if grade_id not in source:
            return f"{where} claims to be the assignment's cell '{grade_id[:60]}', which it has not"
        if source[grade_id]["cell_type"] != cell.cell_type:
            return f"{where} ('{grade_id}') was changed from a {source[grade_id]['cell_type']} cell"
    return None
