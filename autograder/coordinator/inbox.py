"""The submissions waiting in ``submitted/``: which students, their content hash, and
whether each holds a notebook nbgrader can grade at all.

Everything in a submission folder is the student's: it is read through
``autograder.sandbox.safefiles`` (no link followed, no FIFO opened, sizes bounded), and a notebook
whose nbgrader metadata nbgrader would choke on gets the fate "invalid notebook" with the
reason, instead of reaching nbgrader and failing as the grader's own error.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
from pathlib import Path

import nbformat

from autograder import utf8
from autograder.config import file_limits, max_files
from autograder.fates import INVALID_NOTEBOOK, NEEDS_REVIEW, NO_NOTEBOOK
from autograder.job import NBGRADER_FILES
from autograder.sandbox import safefiles

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# nbgrader's own cell names (feedback pages print them unescaped): letters, digits, _ and -.
GRADE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
# The only timestamps the grader takes: what the imports write (UTC), nbgrader submit's,
# and ISO 8601 (`T`, `Z`, `+01:00`). Never " +0100": nbgrader reads it as 100 seconds.
TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z| UTC|[+-]\d{2}:?\d{2})?$"
)
FLAGS = ("grade", "solution", "locked", "task")
SCHEMA_VERSION = 3


def valid_student_id(name: str) -> bool:
    """A plain identifier: letters, digits, '.', '_' and '-', not starting with a dot."""
    return bool(STUDENT_ID.fullmatch(name)) and ".." not in name


# A name that is no plain id but may still stand for a student in the exports (which put it
# in a CSV cell and a ledger file name): ASCII letters, digits, '_', '.', '@' and '-',
# starting with a letter, digit or '_' (never '=', '+', '-' or '@', which a spreadsheet reads
# as a formula: outside attack 72), no space, at most 200 characters. ASCII only: a name in
# another script could look like a classmate's id ("ѕ001", a Cyrillic letter, or a
# fullwidth "ｓ000"), a row beside theirs (outside attack 73); such a name is named only
# where it is the gradebook's own.
ATTRIBUTABLE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,199}$")


def attributable(name: str, roster=()) -> bool:
    """Whether an ungraded folder or entry named ``name`` is that student's "needs review":
    a student of the gradebook (the instructor's own id), or a name of ``ATTRIBUTABLE``'s
    shape; else it is no one's (a note), as a name of no student's is."""
    return name in roster or bool(ATTRIBUTABLE.fullmatch(name))


# Why a folder of submitted/ whose name is no plain identifier is not graded (plain
# nbgrader's collect, or an instructor, can make one: an e-mail address or an accented
# name as a JupyterHub user's id). Its student gets no score, never "not submitted".
NOT_A_PLAIN_ID = (
    "not graded: course-grade grades a folder of submitted/ only when its name is a plain "
    "student id (ASCII letters, digits, '.', '_' and '-', at most 64, not starting with "
    "either of the last three); rename the folder and the student in the gradebook, or "
    "grade this submission with nbgrader autograde"
)


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
    nbgrader's ``CourseDirectory.max_file_size``, folders over ``max_dir_size``, more
    names than ``c.SubmissionLimits.max_files``)."""
    return safefiles.regular_files(
        folder, *file_limits(config), limit_count=max_files(config), uncounted=NBGRADER_FILES
    )


def digest(files: dict[str, bytes], refused: list[str]) -> str:
    """A hash of every file's name and bytes: changes exactly when the submission does."""
    h = hashlib.sha256()
    # A name that is not UTF-8 (b"notes\xff.txt") reads as a lone surrogate: its own bytes
    # again, never an exception that stops the class (attack 35).
    for name in sorted(files):
        h.update(os.fsencode(name) + b"\0" + hashlib.sha256(files[name]).digest())
    for line in refused:
        h.update(b"refused\0" + line.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# Cells a submitted notebook may have. nbgrader's own steps, which run in the grading
# worker outside every limit of the kernels', cost about 0.2 ms a cell: an outside attack's
# 107,000 empty cells (under the 5 MB file size) held the worker 22 s a run, and nbformat's
# check here as long again, on every run.
MAX_CELLS = 2_000


# How deep a notebook's JSON may nest. The course's notebooks nest 8 deep with their
# outputs (a widget's or a plot's state a few levels more); nbgrader's own steps recurse
# through a notebook and failed on metadata nested about 490 deep (an outside attack), a
# submission that then came back as the grader's own error on every run.
MAX_DEPTH = 100


def outline(raw: bytes) -> tuple[int, int]:
    """(cells, depth): how many cells a notebook's JSON lists and how deep it nests, read
    before nbformat builds and checks it; (0, 0) when it is no JSON notebook (nbformat
    then says what is wrong). An nbformat 3 notebook's cells are its worksheets'."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return 0, 0
    if not isinstance(doc, dict):
        return 0, 0
    lists = [doc.get("cells")]
    worksheets = doc.get("worksheets")
    if isinstance(worksheets, list):
        lists += [w.get("cells") for w in worksheets if isinstance(w, dict)]
    return sum(len(c) for c in lists if isinstance(c, list)), depth(doc)


def depth(value) -> int:
    """How deep ``value`` (JSON's dicts and lists) nests, counted without recursion and
    only up to ``MAX_DEPTH + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        value, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(value, dict):
            stack.extend((v, level + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, level + 1) for v in value)
    return deepest


def _too_deep(name: str) -> str:
    return (
        f"{name} nests more than {MAX_DEPTH} levels deep (in its metadata or outputs); "
        "the grader reads at most that (the course's notebooks nest under 10): submit the "
        "notebook as Jupyter saved it"
    )


def problem(
    files: dict[str, bytes], refused: list[str], notebooks: list[str], source_cells: dict[str, dict]
) -> tuple[str, str] | None:
    """(fate, message) when the submission cannot be graded, else None.

    ``source_cells``: grade_id -> nbgrader metadata of the source notebook's cells.
    """
    if refused:
        return INVALID_NOTEBOOK, "the submission holds what the grader will not open: " + "; ".join(
            refused[:3]
        )
    found = sorted(n for n in files if n.endswith(".ipynb") and "/" not in n)
    for name in notebooks:
        if name not in files:
            others = f"; found {', '.join(found)}" if found else "; the folder has no notebook"
            return NO_NOTEBOOK, f"expected {name}{others}"
        if not files[name].strip():
            return INVALID_NOTEBOOK, f"{name} is an empty file"
        cells, nesting = outline(files[name])
        if cells > MAX_CELLS:
            return INVALID_NOTEBOOK, (
                f"{name} has {cells:,} cells; the grader reads at most {MAX_CELLS:,} "
                "(the course's notebooks have under 50): remove the cells that were added "
                "and submit again"
            )
        if nesting > MAX_DEPTH:
            return INVALID_NOTEBOOK, _too_deep(name)
        try:
            nb = nbformat.reads(files[name].decode("utf-8"), as_version=4)
            # An nbformat 3 notebook is converted as it is read, and a "json" output, a
            # string there, becomes JSON: it may nest deeper now than its file did.
            if depth(nb) > MAX_DEPTH:
                return INVALID_NOTEBOOK, _too_deep(name)
            if len(nb.cells) > MAX_CELLS:
                return INVALID_NOTEBOOK, f"{name} has more than {MAX_CELLS:,} cells"
            nbformat.validate(nb)
        except Exception as exc:  # nbformat raises several kinds; all mean "not a notebook"
            text = str(exc).strip()
            first_line = text.splitlines()[0] if text else type(exc).__name__
            return INVALID_NOTEBOOK, f"{name} is not a valid notebook: {first_line[:200]}"
        if utf8.may_hold_surrogates(files[name]) and not utf8.carries(nb):
            # Jupyter cannot save such a notebook, and no step after this could write it.
            return INVALID_NOTEBOOK, (
                f"{name} holds a lone surrogate (a \\ud800-\\udfff escape that is half a "
                "character), which no UTF-8 file can hold: remove it and submit again"
            )
        bad = metadata_problem(
            nb, {g: m for g, m in source_cells.items() if m.get("notebook", name) == name}
        )
        if bad:
            return INVALID_NOTEBOOK, f"{name}: {bad}"
    bad = timestamp_problem(files)
    if bad:  # the notebook may be fine: its date is what cannot be read
        return NEEDS_REVIEW, bad
    return None


def source_cells(course_root: Path, assignment: str) -> dict[str, dict]:
    """grade_id -> nbgrader metadata, for every nbgrader cell of the source notebooks."""
    cells = {}
    for name in expected_notebooks(course_root, assignment):
        nb = nbformat.read(course_root / "source" / assignment / name, as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if isinstance(meta, dict) and meta.get("grade_id"):
                cells[meta["grade_id"]] = {**meta, "cell_type": cell.cell_type, "notebook": name}
    return cells


_ACCEPTED: set[str] = set()  # cell types and metadata nbgrader's validator accepted
_MAX_ACCEPTED = 10_000


def _refused_by_nbgrader(cell) -> str | None:
    """Why nbgrader's own validator (MetadataValidatorV3) refuses a cell's metadata, or None.

    Its verdict depends only on the cell's type and nbgrader metadata, and a class's
    notebooks repeat the release's cells: what it accepted once is not checked again
    (jsonschema checks the schema itself on every call, which made this most of the
    coordinator's time). A refusal is never remembered, so its message is this cell's.
    """
    try:
        key = json.dumps([cell.get("cell_type"), cell.metadata["nbgrader"]], sort_keys=True)
    except (TypeError, ValueError):
        key = None
    if key in _ACCEPTED:
        return None
    try:
        _validator().validate_cell(copy.deepcopy(cell))
    except Exception as exc:  # nbgrader's ValidationError, SchemaTooOldError, KeyError...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return first[:160]
    if key is not None and len(_ACCEPTED) < _MAX_ACCEPTED:
        _ACCEPTED.add(key)
    return None


@functools.lru_cache(maxsize=1)
def _validator():
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    return MetadataValidatorV3()


def metadata_problem(nb, source: dict[str, dict]) -> str | None:
    """Why nbgrader could not grade this notebook's cell metadata, or None.

    Each cell's nbgrader metadata must pass nbgrader's own schema (MetadataValidatorV3),
    name a cell of the assignment, and keep that cell's type and role (test, answer,
    locked, task): nbgrader's autograde fails on any of these, as the grader's own error.
    """
    for number, cell in enumerate(nb.cells, start=1):
        meta = cell.get("metadata", {}).get("nbgrader")
        if meta is None:
            continue
        where = f"cell {number}"
        if not isinstance(meta, dict):
            return f"{where} has nbgrader metadata that is not a mapping (was it edited by hand?)"
        refused = _refused_by_nbgrader(cell)
        if refused:
            return f"{where} has nbgrader metadata nbgrader refuses ({refused})"
        grade_id = meta.get("grade_id")
        if grade_id is not None and not GRADE_ID.fullmatch(str(grade_id)):
            return f"{where} has an nbgrader cell name that is not a plain name"
        if not any(meta.get(flag) for flag in FLAGS) and grade_id not in source:
            continue  # an ordinary cell (a name alone gives it no role)
        if grade_id not in source:
            return f"{where} claims to be the assignment's cell '{grade_id}', which it has not"
        if source[grade_id]["cell_type"] != cell.cell_type:
            return f"{where} ('{grade_id}') was changed from a {source[grade_id]['cell_type']} cell"
        changed = [f for f in FLAGS if bool(meta.get(f)) != bool(source[grade_id].get(f))]
        if changed:
            return f"{where} ('{grade_id}') had its nbgrader role changed ({', '.join(changed)})"
    return deleted_problem(nb, source)


def deleted_problem(nb, source: dict[str, dict]) -> str | None:
    """nbgrader puts a deleted test cell back after the source cell before it, and fails
    when that cell was deleted too (an answer deleted with its test): say so, in words."""
    present = set()
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict) and (meta.get("grade") or meta.get("solution")):
            present.add(meta.get("grade_id"))
    order = list(source)
    for index, grade_id in enumerate(order):
        before = order[index - 1] if index else None
        if (
            source[grade_id].get("grade")
            and grade_id not in present
            and before is not None
            and before not in present
            and not source[before].get("grade")
        ):
            return (
                f"the test cell '{grade_id}' was deleted, and '{before}' before it is "
                "not an answer or test cell here any more: nbgrader cannot put the test "
                "back; restore both from the release (fetch the assignment again) and "
                "submit again"
            )
    return None


def ordinary_cells(
    files: dict[str, bytes], notebooks: list[str], source: dict[str, dict] | None = None
) -> tuple[dict, list[str]]:
    """The files, with the nbgrader metadata taken off every cell that is not one of the
    assignment's own, and what was done, in words. Two kinds: a copy of a cell (a learner
    who copies a cell in JupyterLab copies its metadata; nbgrader keeps the first and fails
    on the rest), and a cell whose metadata gives it no role and names no cell of
    ``source`` (nbgrader's autograde drops such a name, then fails looking for it).
    Either is graded as the ordinary cell it is."""
    notes = []
    for name in notebooks:
        nb = nbformat.reads(files[name].decode("utf-8"), as_version=4)
        seen: set[str] = set()
        copies, stray = [], []
        for number, cell in enumerate(nb.cells, start=1):
            meta = cell.get("metadata", {}).get("nbgrader")
            if not isinstance(meta, dict):
                continue
            grade_id = meta.get("grade_id")
            if (
                source is not None
                and grade_id not in source
                and not any(meta.get(flag) for flag in FLAGS)
            ):
                del cell.metadata["nbgrader"]
                # its name only if it is a plain one: the note reaches the reports
                plain = isinstance(grade_id, str) and GRADE_ID.fullmatch(grade_id)
                stray.append(grade_id if plain else f"cell {number}")
                continue
            if grade_id is None:
                continue
            if grade_id in seen:
                del cell.metadata["nbgrader"]
                copies.append(grade_id)
            seen.add(grade_id)
        if copies or stray:
            files = {**files, name: nbformat.writes(nb).encode()}
        if copies:
            notes.append(
                f"{name}: copies of cell(s) {', '.join(sorted(set(copies)))} graded "
                "as ordinary cells (only the first counts)"
            )
        if stray:
            notes.append(
                f"{name}: cell(s) {', '.join(stray)} graded as ordinary cells (nbgrader "
                "metadata that names no cell of the assignment and gives no role)"
            )
    return files, notes


# A date as nbgrader's exchange writes it in a course with ``c.Exchange.timezone`` set to a
# named zone ("%Y-%m-%d %H:%M:%S.%f %Z": "... 07:55:05.865602 EST", or EDT in summer).
ZONE_NAMED = re.compile(
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?) ([A-Za-z]{2,6}|[+-]\d{2}(?:\d{2})?)$"
)


@functools.lru_cache(maxsize=4)
def _zone(name: str):
    """The named zone of the course's config, or None (never a lookup of a path)."""
    import zoneinfo

    if name in ("UTC", "") or name not in zoneinfo.available_timezones():
        return None
    return zoneinfo.ZoneInfo(name)


def utc_stamp(text: str, zone_name: str) -> str:
    """``text`` in UTC when it is a date written in the course's named zone, as nbgrader
    writes it with ``c.Exchange.timezone`` ("... EST", "... EDT"); else ``text`` as it is
    (``timestamp_problem`` then judges it).

    The abbreviation is read only as the course's zone names that moment: EDT is New York's
    summer time in a course set to America/New_York, and nothing in any other. nbgrader's
    own parser looks the last word up as a zone file: EST is found, EDT, CEST and BST are
    not, and read as UTC (hours off); refused here, such a date made the submission
    "needs review" and lost its grade (outside review 71)."""
    found = ZONE_NAMED.fullmatch(text.strip())
    zone = _zone(zone_name) if found else None
    if zone is None:
        return text
    from datetime import datetime, timezone

    shape = "%Y-%m-%d %H:%M:%S.%f" if "." in found[1] else "%Y-%m-%d %H:%M:%S"
    try:
        naive = datetime.strptime(found[1], shape)
    except ValueError:
        return text
    for fold in (0, 1):  # an hour that comes twice (autumn) has two abbreviations
        local = naive.replace(tzinfo=zone, fold=fold)
        if local.tzname() != found[2]:
            continue
        try:
            utc = local.astimezone(timezone.utc)
        except (OverflowError, ValueError):  # 9999-12-31 23:59 EST is in no year of UTC
            return text  # (attack 72: the whole run ended with a traceback)
        return f"{utc.year:04d}-{utc:%m-%d %H:%M:%S.%f} UTC"
    return text


def timestamp_problem(files: dict[str, bytes]) -> str | None:
    """A timestamp.txt must read as a date and nothing else: nbgrader passes its last word
    to a time-zone lookup, which would open any path named there."""
    if "timestamp.txt" not in files:
        return None
    text = files["timestamp.txt"].decode("utf-8", errors="replace").strip()
    if TIMESTAMP.match(text) and _parses(text):
        return None
    return (
        f"timestamp.txt is not a date the grader reads: {text[:40]!r}; give it a date "
        "such as 2026-12-03 17:00:00 UTC, or remove it (no date: no late penalty)"
    )


def _parses(text: str) -> bool:
    """Whether nbgrader's own parser reads the date (only once it has the pattern's shape):
    2026-02-30, a month 13 or an offset +99:99 have it, and nbgrader raised on each, in the
    worker (the student's `error`, every run) or in the coordinator (an outside attack:
    a rejected resubmission's date ended every run before anyone was graded)."""
    from nbgrader.utils import parse_utc

    try:
        parse_utc(text)
    except (ValueError, OverflowError):  # dateutil's ParserError is a ValueError
        return False
    return True
