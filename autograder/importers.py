"""Bring submissions into ``submitted/<student>/<assignment>/`` from three sources.

- the nbgrader exchange: nbgrader's own collect, with ``SafeExchangeCollect`` (set in
  nbgrader_config.py through ``ExchangeFactory.collect``) copying regular files only;
- an LMS zip download: entries named by ``FileNameCollectorPlugin.named_regexp`` in
  nbgrader_config.py, extracted here with bounds (nbgrader's own zip_collect extracts
  everything, nested archives included, and stops at the first bad entry);
- a folder of notebooks named by student: ``<student>.ipynb`` or ``<student>/*.ipynb``.

Threat model: every name and byte in a download, an exchange folder or an inbox folder
was chosen by a student. So a student id must be a plain identifier; the LMS's own
prefix, not the student's file name, decides whose an entry is; nothing is followed
through a link; sizes, counts and nesting are bounded; and a bad entry becomes a problem
of that entry (``(student_id, fate, message)``, or no student when none can be told),
never the end of the import.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from traitlets import Integer
from traitlets.config import Configurable

from autograder import safefiles
from autograder.config import file_limits, load_course_config
from autograder.fates import INVALID_NOTEBOOK, NEEDS_REVIEW, NO_NOTEBOOK
from autograder.inbox import expected_notebooks, valid_student_id

Problem = tuple[str, str, str]  # (student id, or "" when none can be told; fate; message)


class ImportFailed(Exception):
    """The whole source cannot be read (not a zip file, no exchange): the instructor's to fix."""
ARCHIVE_SUFFIXES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".zst")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,127}$")


class ImportLimits(Configurable):
    """Bounds on what an LMS download may hold (the file size limit is nbgrader's own
    ``CourseDirectory.max_file_size``)."""

    max_total_mb = Integer(500, help="Uncompressed size of a whole download.").tag(config=True)
    max_entries = Integer(20_000, help="Entries in a download.").tag(config=True)


def _nbgrader(course_root: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    # nbgrader runs `alembic` from PATH when it creates or upgrades a gradebook.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=course_root,
                          capture_output=True, text=True, env=env)


def _limits(config) -> tuple[int, int, int]:
    limits = ImportLimits(config=config)
    return file_limits(config)[0], limits.max_total_mb * 1_000_000, limits.max_entries


# -- the nbgrader exchange ---------------------------------------------------------------
class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect, refusing unsafe student ids and copying regular files only."""

    def init_src(self):
        super().init_src()
        self.problems: list[Problem] = []
        kept = []
        for record in self.src_records:
            if valid_student_id(record["username"]):
                kept.append(record)
            else:
                self.problems.append(("", NO_NOTEBOOK, f"exchange entry {record['filename'][:80]!r}: "
                                      "not a plain student id; not collected"))
        self.src_records = kept

    def do_copy(self, src, dest, log=None):
        files, refused = safefiles.regular_files(Path(src), *file_limits(self.config))
        replace_folder(Path(dest), files)
        if refused:
            student = Path(dest).parent.name
            self.problems.append((student, INVALID_NOTEBOOK, "the exchange copy held what the "
                                  "grader will not open: " + "; ".join(refused[:3])))
            _remove_folder(Path(dest))


def import_exchange(course_root: Path, assignment: str) -> list[Problem]:
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeFactory

    config = load_course_config(course_root)
    config.CourseDirectory.assignment_id = assignment
    config.ExchangeFactory.collect = SafeExchangeCollect
    collect = ExchangeFactory(config=config).Collect(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config), config=config)
    collect.update = True
    collect.start()
    return list(getattr(collect, "problems", []))


# -- an LMS zip download -----------------------------------------------------------------
def import_zip(course_root: Path, assignment: str, zip_path: Path) -> list[Problem]:
    from nbgrader.plugins import FileNameCollectorPlugin

    config = load_course_config(course_root)
    each, total_limit, max_entries = _limits(config)
    plugin = FileNameCollectorPlugin(config=config)
    problems: list[Problem] = []
    chosen: dict[str, dict[str, tuple]] = {}  # student -> file -> (timestamp, bytes, entry)
    ties: dict[str, set[str]] = {}
    total = 0
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ImportFailed(f"{Path(zip_path).name} is not a zip file we can read ({exc})") from None
    with archive:
        entries = [e for e in archive.infolist() if not e.is_dir()]
        for number, entry in enumerate(entries):
            name = entry.filename
            info = _parse_entry(plugin, name)
            student = info.get("student_id", "") if info else ""
            if number >= max_entries:
                problems.append((student, NO_NOTEBOOK, f"{_shown(name)}: the download has more "
                                 f"than {max_entries} entries; the rest were not read"))
                continue
            why = _entry_problem(name, info)
            if why:
                problems.append((student, NO_NOTEBOOK if not student else INVALID_NOTEBOOK, why))
                continue
            if entry.file_size > each or total + entry.file_size > total_limit:
                problems.append((student, INVALID_NOTEBOOK, f"{_shown(name)} is too large "
                                 f"({entry.file_size // 1000} kB)"))
                continue
            try:
                with archive.open(entry) as f:
                    data = f.read(each + 1)  # the declared size may lie
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
                problems.append((student, INVALID_NOTEBOOK, f"{_shown(name)} cannot be read ({exc})"))
                continue
            if len(data) > each:
                problems.append((student, INVALID_NOTEBOOK, f"{_shown(name)} is too large"))
                continue
            total += len(data)
            stamp = info.get("timestamp") or ""
            file_id = info["file_id"]
            previous = chosen.setdefault(student, {}).get(file_id)
            if previous is None or stamp > previous[0]:
                chosen[student][file_id] = (stamp, data, name)
                ties.get(student, set()).discard(file_id)
            elif stamp == previous[0]:
                ties.setdefault(student, set()).add(file_id)
    for student, files in sorted(chosen.items()):
        if ties.get(student):
            problems.append((student, NEEDS_REVIEW, "two attempts of "
                             f"{', '.join(sorted(ties[student]))} with the same date: neither "
                             "was taken; keep one in the download"))
            _remove_folder(course_root / "submitted" / student / assignment)
            continue
        stamps = sorted(stamp for stamp, _, _ in files.values() if stamp)
        contents = {file_id: data for file_id, (_, data, _) in files.items()}
        if stamps:
            contents["timestamp.txt"] = _timestamp(stamps[-1]).encode()
        replace_folder(course_root / "submitted" / student / assignment, contents)
    return problems


def _parse_entry(plugin, name: str) -> dict | None:
    try:
        info = plugin.collect(Path(name).name)
    except Exception:  # noqa: BLE001 - a name the pattern cannot take is that entry's problem
        return None
    return info if isinstance(info, dict) else None


def _entry_problem(name: str, info: dict | None) -> str | None:
    if name.startswith("/") or ".." in Path(name).parts or "\\" in name:
        return f"{_shown(name)}: a path outside the download; not extracted"
    if not info or not info.get("student_id"):
        return f"{_shown(name)}: not named like an LMS submission; not extracted"
    if not valid_student_id(info["student_id"]):
        return f"{_shown(name)}: {info['student_id'][:40]!r} is not a plain student id"
    file_id = info.get("file_id") or ""
    if not FILE_NAME.match(file_id):
        return f"{_shown(name)}: {file_id[:40]!r} is not a plain file name"
    if file_id.lower().endswith(ARCHIVE_SUFFIXES):
        return f"{_shown(name)}: an archive inside the download; archives are not opened"
    return None


def _timestamp(stamp: str) -> str:
    """An LMS date (2024-03-01-10-00-00 or 2024-03-01) as nbgrader's timestamp.txt."""
    parts = [int(p) for p in re.findall(r"\d+", stamp)][:6]
    try:
        moment = datetime(*parts, tzinfo=timezone.utc) if len(parts) >= 3 else None
    except ValueError:
        moment = None
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f %Z") if moment else stamp


def _shown(name: str) -> str:
    return repr(name[:80])


# -- a folder of notebooks named by student ----------------------------------------------
def import_folder(course_root: Path, assignment: str, folder: Path) -> list[Problem]:
    config = load_course_config(course_root)
    each, total_limit, _ = _limits(config)
    notebooks = expected_notebooks(course_root, assignment)
    problems: list[Problem] = []
    found: dict[str, list[os.DirEntry]] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            student = entry.name
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(".ipynb"):
            student = entry.name[: -len(".ipynb")]
        else:
            kind = "a link" if entry.is_symlink() else "not a notebook or a folder"
            problems.append(("", NO_NOTEBOOK, f"{entry.name[:80]!r} is {kind}; skipped"))
            continue
        if not valid_student_id(student):
            problems.append(("", NO_NOTEBOOK, f"{entry.name[:80]!r} is not named by a plain "
                             "student id; skipped"))
            continue
        found.setdefault(student, []).append(entry)
    for student, entries in sorted(found.items()):
        if len(entries) > 1:
            names = " and ".join(e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
                                 for e in entries)
            problems.append((student, NEEDS_REVIEW, f"both {names} are in the folder: neither "
                             "was taken; keep one"))
            _remove_folder(course_root / "submitted" / student / assignment)
            continue
        entry = entries[0]
        if entry.is_dir(follow_symlinks=False):
            files, refused = safefiles.regular_files(Path(entry.path), each, total_limit)
        else:
            files, refused = {}, []
            try:
                files[notebooks[0] if len(notebooks) == 1 else entry.name] = \
                    safefiles.read_bytes(Path(entry.path), each)
            except safefiles.Unsafe as exc:
                refused.append(str(exc))
        if refused:
            problems.append((student, INVALID_NOTEBOOK, "not taken: " + "; ".join(refused[:3])))
            _remove_folder(course_root / "submitted" / student / assignment)
            continue
        replace_folder(course_root / "submitted" / student / assignment, files)
    return problems


def replace_folder(dest: Path, files: dict[str, bytes]) -> None:
    """Make ``dest`` hold exactly ``files``: a new folder, then a rename over the old."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=".incoming-", dir=dest.parent))
    shutil.rmtree(fresh)
    safefiles.write_tree(fresh, files)
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    fresh.rename(dest)


def _remove_folder(dest: Path) -> None:
    """An import that cannot say which attempt is the student's leaves none to grade."""
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)


def record_problems(course_root: Path, assignment: str, problems: list[Problem]) -> None:
    """Put import problems in the ledger, so the report gives those students a fate."""
    from autograder.fates import Outcome
    from autograder.ledger import Ledger

    ledger = Ledger(course_root, assignment)
    for student, fate, message in problems:
        if student:
            ledger.put(Outcome(student, fate, 0.0, None, [message]).as_dict())
