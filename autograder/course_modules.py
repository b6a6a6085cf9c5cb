"""The course's own Python modules that its nbgrader config names, as nbgrader finds them.

nbgrader's commands put the folder they run in, the course's, first on ``sys.path``
(``NbGrader.init_syspath``), so a config may name a class of a module kept beside
``nbgrader_config.py``: a late-penalty plugin (``c.AssignLatePenalties.plugin_class =
"penalties.Hourly"``), a preprocessor. course-grade's processes run elsewhere (a worker
has a private copy of the course, on a cluster another machine), and such a class could not
be imported there: every submission's fate was ``error`` (outside review 71).

Contract:
- ``named(course_root, config)``: the files of each top-level module or package that a
  config value names (a dotted name whose first part is ``<part>.py``, or a folder
  ``<part>/`` with an ``__init__.py``, at the course root), as relative path -> bytes:
  regular files only, within ``MAX_BYTES`` in all (a course's own modules, never a
  student's: submissions live under ``submitted/``, which no config names).
- ``importable(folder)``: ``folder`` first on ``sys.path``, once, as nbgrader puts the
  course's; the coordinator passes the course folder, a worker its private copy, where it
  has written the same files.
- ``import_problem(name, files)``: why ``name`` cannot be imported from ``files`` alone, as a
  worker has them (a fresh Python in a folder holding only them), or None. A module that
  reads a file kept beside it, not sent, imported in the course folder and failed on every
  worker, one submission at a time (outside attack 77).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.sandbox import safefiles

DOTTED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z_][A-Za-z0-9_]*)+$")
MAX_BYTES = 16 * 1024 * 1024


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def named(course_root: Path, config) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    tops = {m[1] for text in _strings(config) if (m := DOTTED.fullmatch(text.strip()))}
    for top in sorted(tops):
        module, package = course_root / f"{top}.py", course_root / top
        if module.is_file() and not module.is_symlink():
            found[module.name] = module.read_bytes()
        elif package.is_dir() and not package.is_symlink() and (package / "__init__.py").is_file():
            files, _ = safefiles.regular_files(package, MAX_BYTES, MAX_BYTES)
            found.update({f"{top}/{name}": data for name, data in files.items()})
    if sum(len(data) for data in found.values()) > MAX_BYTES:
        raise ValueError(f"the course's modules named in its config pass {MAX_BYTES >> 20} MB")
    return found


def importable(folder: Path) -> None:
    path = str(folder)
    if path not in sys.path:
        sys.path.insert(0, path)


def import_problem(name: str, files: dict[str, bytes]) -> str | None:
    with tempfile.TemporaryDirectory(prefix="course-modules-") as folder:
        safefiles.write_tree(Path(folder), files, mode=safefiles.PRIVATE)
        code = "import sys; from traitlets.utils.importstring import import_item; import_item(sys.argv[1])"
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, name],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=120,
            )
        except subprocess.TimeoutExpired:
            return "its import did not end within 120 s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"
