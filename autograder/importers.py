"""Bring submissions into ``submitted/<student>/<assignment>/`` from three sources.

- the nbgrader exchange: ``nbgrader collect``;
- an LMS zip download: ``nbgrader zip_collect``, whose file-name pattern is
  ``FileNameCollectorPlugin.named_regexp`` in nbgrader_config.py;
- a folder of notebooks named by student: ``<student>.ipynb`` (or ``<student>/*.ipynb``).

Each returns the problems it found as ``(student_id, fate, message)``; a problem never
stops the import of the others.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.config import load_course_config
from autograder.fates import NO_NOTEBOOK
from autograder.inbox import expected_notebooks

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
Problem = tuple[str, str, str]


def _nbgrader(course_root: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    # nbgrader runs `alembic` from PATH when it creates or upgrades a gradebook.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=course_root,
                          capture_output=True, text=True, env=env)


def import_exchange(course_root: Path, assignment: str) -> list[Problem]:
    result = _nbgrader(course_root, "collect", assignment, "--update")
    if result.returncode != 0:
        raise RuntimeError("nbgrader collect failed:\n" + result.stderr[-2000:])
    return []


def import_zip(course_root: Path, assignment: str, zip_path: Path) -> list[Problem]:
    archive = course_root / "downloaded" / assignment / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    shutil.copy2(zip_path, archive / Path(zip_path).name)
    result = _nbgrader(course_root, "zip_collect", assignment, "--force")
    if result.returncode != 0:
        raise RuntimeError("nbgrader zip_collect failed:\n" + result.stderr[-2000:])
    return _zip_problems(course_root, assignment)


def _zip_problems(course_root: Path, assignment: str) -> list[Problem]:
    """Students whose files matched the pattern but gave no notebook of the assignment."""
    from nbgrader.plugins import FileNameCollectorPlugin

    plugin = FileNameCollectorPlugin(config=load_course_config(course_root))
    extracted = course_root / "downloaded" / assignment / "extracted"
    seen: dict[str, list[str]] = {}
    for path in sorted(p for p in extracted.rglob("*") if p.is_file()):
        info = plugin.collect(str(path))
        if info and info.get("student_id"):
            seen.setdefault(info["student_id"], []).append(info.get("file_id", path.name))
    problems = []
    for student, names in seen.items():
        folder = course_root / "submitted" / student / assignment
        if not any((folder / nb).exists() for nb in expected_notebooks(course_root, assignment)):
            wanted = ", ".join(expected_notebooks(course_root, assignment))
            problems.append((student, NO_NOTEBOOK,
                             f"expected {wanted}; the zip had {', '.join(names)}"))
    return problems


def import_folder(course_root: Path, assignment: str, folder: Path) -> list[Problem]:
    notebooks = expected_notebooks(course_root, assignment)
    problems: list[Problem] = []
    for entry in sorted(Path(folder).iterdir()):
        student = entry.name.split(".", 1)[0] if entry.is_file() else entry.name
        if entry.is_symlink() or not STUDENT_ID.match(student):
            problems.append((student or entry.name, NO_NOTEBOOK,
                             f"skipped {entry.name}: not a plain file named by a student id"))
            continue
        if entry.is_dir():
            files = [p for p in entry.glob("*.ipynb") if not p.is_symlink()]
            targets = [(p, p.name) for p in files]
        elif entry.suffix == ".ipynb" and len(notebooks) == 1:
            targets = [(entry, notebooks[0])]
        else:
            problems.append((student, NO_NOTEBOOK,
                             f"{entry.name} is not a notebook (expected {student}.ipynb)"))
            continue
        dest = course_root / "submitted" / student / assignment
        dest.mkdir(parents=True, exist_ok=True)
        for src, name in targets:
            shutil.copyfile(src, dest / name)
    return problems


def record_problems(course_root: Path, assignment: str, problems: list[Problem]) -> None:
    """Put import problems in the ledger, so the report gives those students a fate."""
    from autograder.fates import Outcome
    from autograder.ledger import Ledger

    ledger = Ledger(course_root, assignment)
    for student, fate, message in problems:
        ledger.put(Outcome(student, fate, 0.0, None, [message]).as_dict())
