"""Bring submissions into ``submitted/<student>/<assignment>/`` from three sources.

- the nbgrader exchange: nbgrader's own collect, with ``SafeExchangeCollect`` (set in
  nbgrader_config.py through ``ExchangeFactory.collect``) copying regular files only;
- an LMS zip download: entries named as Blackboard names them (``EntryNames``: an id keeps
  its ``_``), or by ``FileNameCollectorPlugin.named_regexp`` where the course sets it,
  extracted here with bounds (nbgrader's own zip_collect extracts
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

import logging
import os
import pwd
import re
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from nbgrader.exchange.abc.exchange import ExchangeError
from nbgrader.exchange.default.collect import ExchangeCollect
from traitlets import Integer, Unicode
from traitlets.config import Configurable

from autograder.config import (
    exchange_config,
    exchange_timezone,
    file_limits,
    gradebook_url,
    load_course_config,
    max_files,
)
from autograder.coordinator.inbox import (
    NOT_A_PLAIN_ID,
    TIMESTAMP,
    attributable,
    expected_notebooks,
    utc_stamp,
    valid_student_id,
)
from autograder.fates import INVALID_NOTEBOOK, NEEDS_REVIEW, NO_NOTEBOOK
from autograder.job import NBGRADER_FILES
from autograder.sandbox import safefiles

log = logging.getLogger(__name__)

Problem = tuple[str, str, str]  # (student id, or "" when none can be told; fate; message)
NOTE = "note"  # a Problem's fate when it is no fate: a note against that student (a forgery,
# or an entry refused beside an attempt of theirs that is taken)


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
    return subprocess.run(
        [str(bin_dir / "nbgrader"), *args], cwd=course_root, capture_output=True, text=True, env=env
    )


def _limits(config) -> tuple[int, int, int]:
    limits = ImportLimits(config=config)
    return file_limits(config)[0], limits.max_total_mb * 1_000_000, limits.max_entries


# -- whose work an import may write ------------------------------------------------------
class Gate:
    """Which students an import writes.

    - Only those chosen with ``course-grade --student`` (everyone without): the others'
      entries are not read, and their submissions stay as they were.
    - Never an id that differs only in case from another, in this import or already in the
      course (``submitted/`` or the gradebook's students). An LMS's usernames ignore case
      and nbgrader's ids do not: ``Ada`` beside ``ada`` would be two gradebook students, one
      of them a row of zeros in every export. No spelling new to the course is guessed at:
      each such id is refused and said once, for this import (never made a student, never
      given a fate, never a note that stays on the spelling the course has), and what is in
      ``submitted/`` stays.
    """

    def __init__(self, course_root: Path, only: Iterable[str] | None = None):
        self.only = set(only) if only else None
        self.known = _known_ids(course_root)
        self.left_out: set[str] = set()

    def chosen(self, student: str) -> bool:
        """Whether a student's entries are this import's to read ("" is no one's: yes)."""
        if not student or self.only is None or student in self.only:
            return True
        self.left_out.add(student)
        return False

    def clashes(self, ids: Iterable[str]) -> tuple[set[str], list[Problem]]:
        """The ids to take, and a problem for each id refused for its case."""
        ids = set(ids)
        spellings: dict[str, set[str]] = {}
        for student in ids | self.known:
            spellings.setdefault(student.casefold(), set()).add(student)
        taken: set[str] = set()
        problems: list[Problem] = []
        for student in sorted(ids):
            others = sorted(spellings[student.casefold()] - {student})
            if not others:
                taken.add(student)
                continue
            where = "in this import" if set(others) & ids else "already in the course"
            message = (
                f"{student!r} and {', '.join(map(repr, others))} ({where}) differ only in "
                f"case: nbgrader would count them as two students, so {student!r} was not "
                "taken; give each student one spelling (rename the entry) and import again"
            )
            # Said, never a fate: a refused spelling must not become a gradebook student
            # (a row of zeros, and a name that then refuses the real one). Nor a note on the
            # spelling the course has: that student did nothing, and a note stays for good.
            problems.append(("", NOTE, message))
        return taken, problems

    def left_out_note(self, source: str) -> list[Problem]:
        if not self.left_out:
            return []
        return [
            ("", NOTE, f"{len(self.left_out)} other student(s) in {source} left out (--student)")
        ]


def _known_ids(course_root: Path) -> set[str]:
    """Student ids the course already has: folders in submitted/, the gradebook's students."""
    submitted = course_root / "submitted"
    ids = set()
    if submitted.is_dir() and not submitted.is_symlink():
        ids = {e.name for e in os.scandir(submitted) if e.is_dir(follow_symlinks=False)}
    url = gradebook_url(load_course_config(course_root), course_root)
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :].split("?")[0]).is_file():
        return ids  # no gradebook yet: opening one would make it
    from nbgrader.api import Gradebook

    with Gradebook(url) as gb:
        ids |= {student.id for student in gb.students}
    return ids


# -- the nbgrader exchange ---------------------------------------------------------------
BACKDATE_SLACK = timedelta(minutes=5)  # nbgrader submit dates the folder, then copies into it


MAX_DATED_ENTRIES = (
    10_000  # files a student's submission folders may hold for their dates to be checked
)


def _last_change(path: str, limit: int = MAX_DATED_ENTRIES) -> tuple[float | None, int]:
    """The latest ctime of a folder and of everything in it (links are not followed, and
    their own ctime counts), or None when it holds more than ``limit`` entries; and how
    many entries were read. Iterative: a student's folder may nest deeper than Python
    recurses."""
    latest, seen, folders = os.lstat(path).st_ctime, 0, [path]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for item in entries:
                seen += 1
                if seen > limit:
                    return None, seen
                latest = max(latest, item.stat(follow_symlinks=False).st_ctime)
                if item.is_dir(follow_symlinks=False):
                    folders.append(item.path)
    return latest, seen


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect, for inbound folders that students wrote.

    Each ``<student>+<assignment>+<timestamp>+<random>`` entry is taken only if its student
    id is a plain identifier; (with ``check_owner``, nbgrader's default) it belongs to the
    system user of that name, checked first, for links and files too, so that an entry
    made under another's name is only ever its maker's note; it is a folder (not a link or
    a file); and its timestamp reads as a date that its ctimes do not contradict, checked
    again once its files are read. Anything else is a problem of that entry, never the end
    of the collect, and an id given a fate passes the same case check as the ones taken.
    The copy holds regular files only, within nbgrader's size limits, and a timestamp.txt
    written from the folder's own date; it replaces the submission in place whole, or not
    at all (an undated one put there with ``--folder`` stays).
    """

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        self.problems: list[Problem] = []
        self.walked: dict[str, int] = {}  # student -> entries of their folders read to date them
        gate = getattr(self, "gate", None) or Gate(Path(self.coursedir.root))
        self.duedate = self._duedate()  # before the records: a backdated one is refused
        self.zone = exchange_timezone(self.config)  # what a date's abbreviation names
        records: dict[str, list[dict]] = {}
        for entry in sorted(os.scandir(self.inbound_path), key=lambda e: e.name):
            record = self._record(entry)
            if record is not None:
                records.setdefault(record["username"], []).append(record)
        self.problems = [p for p in self.problems if gate.chosen(p[0])]
        records = {student: r for student, r in records.items() if gate.chosen(student)}
        # An entry left for review beside an attempt that is taken is no fate of the
        # student's: they are graded on that attempt, and the entry is said in every report
        # (as a fate, it replaced their grade, and every later collect graded them again).
        self.problems = [
            (p[0], NOTE, f"{p[2]} (graded on another attempt of theirs)")
            if p[1] == NEEDS_REVIEW and p[0] in records
            else p
            for p in self.problems
        ]
        # An entry that is not taken still gives its student a fate (a gradebook row): its
        # id must pass the case check too, or "VIC1" would shut the real vic1 out for good.
        fated = {p[0] for p in self.problems if p[0] and p[1] != NOTE}
        taken, clashes = gate.clashes(set(records) | fated)
        self.problems = [p for p in self.problems if p[1] == NOTE or not p[0] or p[0] in taken]
        self.problems += clashes + gate.left_out_note("the exchange")
        self.src_records = []
        for student, attempts in sorted(records.items()):
            if student not in taken:
                continue
            attempts.sort(key=lambda r: r["timestamp"], reverse=True)
            on_time = [r for r in attempts if self.duedate and r["timestamp"] <= self.duedate]
            self.src_records.append(on_time[0] if on_time and self.before_duedate else attempts[0])

    def _record(self, entry) -> dict | None:
        parts = entry.name.rsplit("+", 3)
        if len(parts) != 4 or parts[1] != self.coursedir.assignment_id:
            return None  # another assignment's, or not nbgrader's
        student, _, stamp, _ = parts
        shown = repr(entry.name[:80])
        if not valid_student_id(student):
            # Not collected. Where the entry is that student's own (the owner check, when
            # on), they get "needs review" and no score, never the 0 of "not submitted"
            # (outside review 71: an e-mail id); a name no ledger file can hold is no one's.
            why, _ = self._owner_problem(entry, student)
            if why is None:
                self.problems.append(_not_plain(student, f"exchange entry {shown}"))
            else:
                self.problems.append(
                    ("", NO_NOTEBOOK, f"exchange entry {shown}: not a plain student id")
                )
            return None
        # Whose entry it is comes first, for links and files too: an entry someone else made
        # under a student's name is the maker's problem, never a fate (or a gradebook row)
        # of the student it names.
        why, owner = self._owner_problem(entry, student)
        if why is not None:
            who = owner if owner is not None and valid_student_id(owner) else ""
            self.problems.append((who, NOTE, f"exchange entry {shown}: {why}"))
            return None
        claimed = _stamp_date(utc_stamp(stamp, self.zone))
        if not entry.is_dir(follow_symlinks=False):
            why = "not a folder"
        elif claimed is None:
            why = "its date does not read as one"
        else:
            why = self._backdated(entry.path, claimed, student)
            if why is None:
                return {"username": student, "filename": entry.name, "timestamp": claimed}
        self.problems.append(
            (student, NEEDS_REVIEW, f"exchange entry {shown}: {why}; not collected")
        )
        return None

    def _backdated(self, path: str, claimed, student: str | None = None) -> str | None:
        """Why a folder's name cannot be its date, or None. A student names the folder but
        cannot set when it, or a file in it, was last changed (its ctime): a name dated
        before the due date on a folder made after it, or whose notebook was rewritten in
        place after it, would escape the late penalty (nbgrader's own collect trusts the
        name). Only late work is checked; BACKDATE_SLACK covers a slow copy. Each student's
        folders together are read up to MAX_DATED_ENTRIES entries, so that many large old
        attempts slow no collect: past that, an attempt is left for review. Without a
        ``student`` (the one attempt copied, dated again) the folder has the bound to
        itself: a bound shared by the copies let one student's 9,994 files leave every
        classmate after them uncollected (attack 22)."""
        if self.duedate is None:
            return None
        walked = self.walked
        before = walked.get(student, 0) if student is not None else 0
        try:
            ctime, seen = _last_change(path, MAX_DATED_ENTRIES - before)
        except OSError:  # gone, or changed, since the folder was listed
            return "it could not be read when its date was checked"
        if student is not None:
            walked[student] = before + seen
        if ctime is None:
            return (
                f"it holds more than {MAX_DATED_ENTRIES} files with the student's other "
                "attempts, too many to check its date"
            )
        made = datetime.fromtimestamp(ctime, timezone.utc).replace(tzinfo=None)
        if made <= self.duedate or claimed >= made - BACKDATE_SLACK:
            return None
        return (
            f"its name dates it {claimed:%Y-%m-%d %H:%M:%S} UTC, but the folder, or a file in "
            f"it, was made or last changed at {made:%Y-%m-%d %H:%M:%S} UTC, after the due "
            "date: the name cannot be its date. Check it and give it its date by hand"
        )

    def _owner_problem(self, entry, student: str) -> tuple[str | None, str | None]:
        """(why the folder is not taken, the system user who made it), or (None, None)."""
        if not self.check_owner:
            return None, None
        try:
            owner = pwd.getpwuid(entry.stat(follow_symlinks=False).st_uid).pw_name
        except (KeyError, OSError):
            return "its owner is no known user; not collected", None
        if owner != student:
            return (
                f"system user {owner} submitted it under {student}'s name; not collected. "
                f"{student}'s own submission and grade are untouched. (Only on a hub where "
                "every student shares one system user is this no forgery: there, set "
                "c.ExchangeCollect.check_owner = False.)"
            ), owner
        return None, None

    def _duedate(self):
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                return gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                return None

    def copy_files(self):
        """nbgrader's copy_files, less its ``rmtree`` of the submission in place before the
        copy: ``do_copy`` decides whether the attempt replaces it (an undated ``--folder``
        submission is kept), and replaces it whole or not at all."""
        for record in self.src_records:
            dest = Path(
                self.coursedir.format_path(
                    self.coursedir.submitted_directory,
                    record["username"],
                    self.coursedir.assignment_id,
                )
            )
            self.do_copy(os.path.join(self.inbound_path, record["filename"]), str(dest))

    def do_copy(self, src, dest, log=None):
        student = Path(dest).parent.name
        # nbgrader's date, in UTC where the exchange wrote it in the course's named zone
        stamp = utc_stamp(Path(src).name.rsplit("+", 3)[2], self.zone)
        kept = newer_kept(Path(dest), stamp, "exchange")
        if kept:  # (``log`` here is nbgrader's argument)
            logging.getLogger(__name__).warning("%s: %s", student, kept)
            return
        try:
            files, refused = safefiles.regular_files(
                Path(src),
                *file_limits(self.config),
                limit_count=max_files(self.config),
                uncounted=NBGRADER_FILES,
            )
        except safefiles.Unsafe as exc:
            files, refused = {}, [str(exc)]
        # Dated again once read: a file rewritten after the first check, before or while
        # it was read, has a ctime after it (the date is of what was read, not of a look).
        late = self._backdated(src, _stamp_date(stamp))
        if late:
            self.problems.append(
                (
                    student,
                    NEEDS_REVIEW,
                    f"exchange entry {Path(src).name[:80]!r}: {late}; not collected",
                )
            )
            return
        if refused:
            self.problems.append(
                (
                    student,
                    INVALID_NOTEBOOK,
                    "the exchange copy held what the "
                    "grader will not open: " + "; ".join(refused[:3]),
                )
            )
            _remove_folder(Path(dest))
            return
        files["timestamp.txt"] = stamp.encode()
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        safefiles.replace_folder(Path(dest), files)


def _stamp_date(stamp: str):
    """An exchange folder's date (naive UTC), or None where it reads as no date: the name
    is the student's, and "2026-13-45 99:99:99" has the shape of one."""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(stamp) if TIMESTAMP.match(stamp) else None
    except (ValueError, TypeError, OverflowError):
        return None


def newer_kept(dest: Path, stamp: str, source: str) -> str | None:
    """Why the submission already at ``dest`` stays in place of an import's attempt dated
    ``stamp``, or None. An import never puts an older attempt in place of a newer one,
    whichever way each came (exchange, LMS download); nor a dated attempt in place of an
    undated one that the instructor put there (``--folder``, or by hand): that is the
    instructor's choice to undo. A date that cannot be read counts as older."""
    from nbgrader.utils import parse_utc

    kept = dest / "timestamp.txt"
    if dest.is_symlink() or not dest.is_dir():
        return None
    if not kept.exists() and not kept.is_symlink():
        if not any(dest.glob("*.ipynb")):
            return None
        return (
            f"kept the undated submission in submitted/ (from --folder, or put there by "
            f"hand) in place of the {source}'s of {stamp}; remove that folder to take it"
        )
    if kept.is_symlink() or not kept.is_file():
        return None
    try:
        kept_text = safefiles.read_bytes(kept, 200).decode().strip()
        if parse_utc(kept_text) > parse_utc(stamp):
            return f"kept the submission of {kept_text}, newer than the {source}'s of {stamp}"
    except (safefiles.Unsafe, ValueError, TypeError, OverflowError):
        return None
    return None


def import_exchange(
    course_root: Path, assignment: str, only: Iterable[str] | None = None
) -> list[Problem]:
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeFactory

    config = exchange_config(course_root)  # the exchange plain nbgrader finds
    config.CourseDirectory.assignment_id = assignment
    config.ExchangeFactory.collect = SafeExchangeCollect
    collect = ExchangeFactory(config=config).Collect(
        coursedir=CourseDirectory(config=config),
        authenticator=Authenticator(config=config),
        config=config,
    )
    collect.update = True
    collect.gate = Gate(course_root, only)
    try:
        collect.start()
    except ExchangeError as exc:  # no exchange, no course in it: the instructor's to fix
        raise ImportFailed(f"nbgrader collect: {exc}") from None
    except PermissionError as exc:  # students' folders are theirs: reading them takes root
        raise ImportFailed(
            f"cannot read the exchange ({exc.filename}: {exc.strerror}); collect as root "
            "(sudo), as the README's --collect line shows. Nothing in the course was changed."
        ) from None
    exposed = open_homes(p.parent.name for p in (course_root / "submitted").glob(f"*/{assignment}"))
    if exposed:
        log.warning(
            "the home folders of %s let other users in: a classmate can read the secret "
            "that nbgrader submit keeps there, and with it fetch their feedback page. "
            "Make them private (chmod 700 /home/<user>; for new accounts, HOME_MODE 0700 "
            "in /etc/login.defs)",
            ", ".join(exposed),
        )
    return list(getattr(collect, "problems", []))


def open_homes(students: Iterable[str]) -> list[str]:
    """The students, among system users, whose home folder others may enter: nbgrader
    keeps each submission's secret in ``~/.local/share/jupyter/nbgrader_cache``, readable
    by anyone who can reach it (attack 19, a08: a classmate fetched one's page)."""
    found = []
    for student in sorted(set(students)):
        try:
            home = pwd.getpwnam(student).pw_dir
            mode = os.stat(home).st_mode  # a home is the administrator's to place
        except (KeyError, OSError):
            continue
        if mode & 0o005:
            found.append(student)
    return found


# -- an LMS zip download -----------------------------------------------------------------
class LmsNames(Configurable):
    """How an LMS names the entries of a download: ``<prefix>_<student id>_attempt_<date>_
    <file>``, as Blackboard writes them. The LMS writes everything up to the date; the file
    name after it is the student's own. Usernames may hold ``_``, so the id is what lies
    between the assignment's prefix and the first ``_attempt_<date>_``."""

    assignment_prefix = Unicode(
        "",
        help=(
            "What the LMS writes before the student id (without the '_' after it), e.g. "
            "'Homework 1'. Empty: the assignment id, which every entry must then start with."
        ),
    ).tag(config=True)


ATTEMPT = re.compile(
    r"_attempt_(?P<timestamp>[0-9]{4}-[0-9]{2}-[0-9]{2}(?:-[0-9]{2}){0,3})_"
    r"(?P<file_id>.+)$"
)
# Blackboard's record of an attempt (its comments, the names of the files): the LMS's own
# ``<prefix>_<student>_attempt_<date>.txt``, beside the files, never a student's file
# (those follow the date after a "_").
ATTEMPT_RECORD = re.compile(r"_attempt_[0-9]{4}-[0-9]{2}-[0-9]{2}(?:-[0-9]{2}){0,3}\.txt$")


class EntryNames:
    """Reads an LMS entry's name as ``{student_id, timestamp, file_id}``, or None.

    With ``c.FileNameCollectorPlugin.named_regexp`` set in the course's config, nbgrader's
    own plugin reads names (another LMS); else ``LmsNames``. Either way the name up to the
    date (``head``) is what the LMS wrote for the student: two different heads read as one
    id are two students, and ``import_zip`` refuses both rather than merge them.
    """

    def __init__(self, config, assignment: str, notebooks: list[str]):
        from nbgrader.plugins import FileNameCollectorPlugin

        self.plugin = (
            FileNameCollectorPlugin(config=config)
            if "named_regexp" in config.get("FileNameCollectorPlugin", {})
            else None
        )
        self.prefix = (LmsNames(config=config).assignment_prefix or assignment) + "_"
        self.notebooks = notebooks

    def parse(self, name: str) -> dict | None:
        base = Path(name).name
        if self.plugin is not None:
            info = _parse_entry(self.plugin, base)
            first = self._lms_reading(base)
            if info and first and first != (info.get("student_id"), info.get("timestamp")):
                info = {
                    **info,
                    "student_id": first[0],  # whose entry it is, as the LMS wrote it
                    "ambiguous": (
                        f"{_shown(name)}: c.FileNameCollectorPlugin.named_regexp reads the "
                        f"whole name as {info.get('student_id')!r} "
                        f"({info.get('timestamp') or 'no date'}), but what the LMS wrote "
                        f"before the student's own file name as {first[0]!r} "
                        f"({first[1] or 'no date'}): the file name the student gave holds "
                        "what an LMS writes; not taken"
                    ),
                }
        else:
            # Blackboard's download is flat: a folder part is no name it wrote, and would
            # let "x/<prefix>_vic1_attempt_<later>_..." stand for vic1's latest attempt.
            match = ATTEMPT.search(base)
            if name != base or not match or not base.startswith(self.prefix):
                return None
            info = {
                "student_id": base[len(self.prefix) : match.start()],
                **match.groupdict(),
                "head": base[: match.start()],
            }
        if info is not None:
            info = {  # the whole name up to the date, folders too: what the LMS wrote
                "head": name.split("_attempt_")[0],
                **info,
                "file_id": self._renamed(info.get("file_id") or ""),
            }
        return info

    def _lms_reading(self, base: str) -> tuple[str, str | None] | None:
        r"""``(student_id, timestamp)`` as the regexp reads the shortest start of ``base``
        that it takes for an entry of its own, with a plain file name after it: what the
        LMS wrote, since it writes its part first and the student's file name follows.
        A greedy regexp (nbgrader's own example, ``.*_(?P<student_id>\w+)_attempt_...``)
        reads the whole name from its last match, which lies in the student's file name
        when they put one there (attack 19: another student's id, an earlier date)."""
        pattern = re.compile(self.plugin.named_regexp)
        for end in range(1, len(base)):
            probe = base[:end] + "x.ipynb"
            match = pattern.match(probe)
            if (
                match is None
                or "student_id" not in pattern.groupindex
                or not match.group("student_id")
                or match.end("student_id") > end
                or "file_id" not in pattern.groupindex
                or not match.start("file_id") <= end <= match.end("file_id")
            ):
                continue
            stamp = match.group("timestamp") if "timestamp" in pattern.groupindex else None
            if stamp is not None and match.end("timestamp") > end:
                continue
            return match.group("student_id"), stamp
        return None

    def _renamed(self, file_id: str) -> str:
        """An LMS renames a second upload of a file (``gpu_tensors-1.ipynb``, ``gpu_tensors
        (1).ipynb``): it is still that notebook, as --folder takes any name."""
        for notebook in self.notebooks:
            stem = re.escape(notebook[: -len(".ipynb")])
            if re.fullmatch(stem + r"(?:-\d{1,3}| ?\(\d{1,3}\))\.ipynb", file_id):
                return notebook
        return file_id


def import_zip(
    course_root: Path, assignment: str, zip_path: Path, only: Iterable[str] | None = None
) -> list[Problem]:
    """Import an LMS download: each student's latest attempt, within bounds per file,
    per student (nbgrader's max_file_size and max_dir_size) and per download; with
    ``only``, those students' entries alone."""
    config = load_course_config(course_root)
    each, total_limit, max_entries = _limits(config)
    per_student = file_limits(config)[1]
    names = EntryNames(config, assignment, expected_notebooks(course_root, assignment))
    heads: dict[str, set[str]] = {}  # student id -> what the LMS wrote for them
    problems: list[Problem] = []
    chosen: dict[str, dict[str, tuple]] = {}  # student -> file -> (timestamp, bytes, entry)
    ties: dict[str, set[str]] = {}
    refused: set[str] = set()  # students with an entry that was not taken
    spent: dict[str, int] = {}
    total = 0
    gate = Gate(course_root, only)
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ImportFailed(f"{Path(zip_path).name} is not a zip file we can read ({exc})") from None

    def refuse(student: str, fate: str, message: str) -> None:
        problems.append((student, fate, message))
        if student:
            refused.add(student)

    with archive:
        entries = [e for e in archive.infolist() if not e.is_dir()]
        # One student's upload is theirs alone to exceed: a student with more files than a
        # submission may hold is refused before anything is read, and their entries
        # count against no limit of the download (attack 38: 20,000 empty files of one
        # student left every classmate after them in the download ungraded).
        most = max_files(config)
        crowded, latest = _survey(entries, names, most)
        for student in sorted(crowded):
            if gate.chosen(student):
                refuse(
                    student,
                    INVALID_NOTEBOOK,
                    f"their upload holds more than {most:,} files (c.SubmissionLimits."
                    "max_files); none was read",
                )
        read = 0
        for entry in entries:
            name = entry.filename
            if ATTEMPT_RECORD.search(Path(name).name):
                continue  # Blackboard's attempt record: nothing of the student's to grade
            info, student = _whose(names, name)
            if not gate.chosen(student) or student in crowded:
                continue
            if student:
                heads.setdefault(student, set()).add(info["head"])
            odd = (info or {}).get("student_id", "")
            if odd and not student and gate.chosen(odd):
                if not _entry_problem(name, info, check_id=False):  # its id is all that is odd
                    refuse(*_not_plain(odd, _shown(name)))
                    continue
            why = (info or {}).get("ambiguous") or _entry_problem(name, info)
            if why and not info:
                why += (
                    f" (expected {names.prefix}<student>_attempt_<date>_<file>; set "
                    "c.LmsNames.assignment_prefix to what your LMS writes before the id)"
                )
            if why:
                fate = NO_NOTEBOOK if not student else INVALID_NOTEBOOK
                refuse(student, NEEDS_REVIEW if info and info.get("ambiguous") else fate, why)
            elif info["file_id"] in NBGRADER_FILES:
                problems.append(
                    (student, NOTE, f"{_shown(name)}: left out (nbgrader writes {info['file_id']})")
                )
            elif (info.get("timestamp") or "") < latest.get((student, info["file_id"]), ""):
                continue  # an earlier attempt of a file sent again: never read, never counted
            elif info["file_id"] in chosen.get(student, {}):
                # A second entry of the file's latest attempt, at the same date: a tie, said
                # without reading it (attack 40: 20,001 entries of one name and date were
                # each read and counted, and classmates after them were left unread).
                ties.setdefault(student, set()).add(info["file_id"])
            elif read >= max_entries or total + entry.file_size > total_limit:
                refuse(
                    student,
                    NEEDS_REVIEW,
                    f"{_shown(name)} was not read: the download is "
                    "larger than the import limits (c.ImportLimits); import the rest apart",
                )
            elif entry.file_size > each or spent.get(student, 0) + entry.file_size > per_student:
                refuse(
                    student,
                    INVALID_NOTEBOOK,
                    f"{_shown(name)} is too large "
                    f"({entry.file_size // 1000} kB; a submission may hold {per_student // 1000} kB)",
                )
            else:
                try:
                    with archive.open(entry) as f:
                        data = f.read(each + 1)  # the declared size may lie
                except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
                    refuse(student, INVALID_NOTEBOOK, f"{_shown(name)} cannot be read ({exc})")
                    continue
                if len(data) > each:
                    refuse(student, INVALID_NOTEBOOK, f"{_shown(name)} is too large")
                    continue
                total += len(data)
                read += 1
                spent[student] = spent.get(student, 0) + len(data)
                _choose(chosen, ties, student, info, data, name)
    notebooks = expected_notebooks(course_root, assignment)
    taken, clashes = gate.clashes(set(chosen) | refused)
    problems = [p for p in problems if not p[0] or p[0] in taken]
    problems += clashes + gate.left_out_note(Path(zip_path).name)
    for student in sorted(taken):
        folder = course_root / "submitted" / student / assignment
        files = chosen.get(student, {})
        if len(heads.get(student, ())) > 1:
            shown = " and ".join(repr(h[:60]) for h in sorted(heads[student]))
            problems.append(
                (
                    student,
                    NEEDS_REVIEW,
                    f"entries named {shown} both read as "
                    f"student {student!r}: two students' work is never merged, so "
                    "neither was taken; set c.LmsNames.assignment_prefix (or "
                    "c.FileNameCollectorPlugin.named_regexp) so each reads as its own id",
                )
            )
            _remove_folder(folder)
        elif ties.get(student):
            problems.append(
                (
                    student,
                    NEEDS_REVIEW,
                    "two attempts of "
                    f"{', '.join(sorted(ties[student]))} with the same date: neither "
                    "was taken; keep one in the download",
                )
            )
            _remove_folder(folder)
        elif not any(nb in files for nb in notebooks) and student in refused:
            _remove_folder(folder)  # never an older attempt in place of a refused one
        elif files:
            files = _up_to_the_notebook(student, files, notebooks)
            stamps = sorted(stamp for stamp, _, _ in files.values() if stamp)
            contents = {file_id: data for file_id, (_, data, _) in files.items()}
            stamp = _timestamp(stamps[-1]) if stamps else None
            kept = newer_kept(folder, stamp, "download") if stamp else None
            if kept:
                log.warning("%s: %s", student, kept)
                continue
            if stamp:
                contents["timestamp.txt"] = stamp.encode()
            safefiles.replace_folder(folder, contents)
    return problems


def _up_to_the_notebook(student: str, files: dict, notebooks: list[str]) -> dict:
    """The files of the attempts up to the latest one with a notebook: that attempt's date
    is the submission's. A later attempt of other files alone (notes, say) changes neither
    what is graded nor its date: it made an on-time notebook late (an outside instructor's
    run). Left out, and said in the log."""
    dated = [files[nb][0] for nb in notebooks if nb in files and files[nb][0]]
    if not dated:
        return files
    latest = max(dated)
    later = sorted(f for f, (stamp, _, _) in files.items() if stamp and stamp > latest)
    if later:
        log.warning(
            "%s: %s came in attempts after the notebook's and were left out: the notebook's "
            "attempt is the submission",
            student,
            ", ".join(later),
        )
    return {f: kept for f, kept in files.items() if f not in later}


def _not_plain(student: str, what: str) -> Problem:
    """An entry of an id course-grade does not grade, not imported: that student's "needs
    review" (no score in any export, never the silent 0 of "not submitted": outside review
    71), where the name is ``inbox.attributable`` (a CSV cell and a ledger file can hold it
    as it is); else no one's."""
    if attributable(student):
        return (student, NEEDS_REVIEW, f"{what}: {NOT_A_PLAIN_ID}")
    return ("", NO_NOTEBOOK, f"{what}: not a plain student id")


def _whose(names: EntryNames, name: str) -> tuple[dict | None, str]:
    """What an entry's name says, and whose it is: "" where no plain student id."""
    info = names.parse(name)
    student = info.get("student_id", "") if info else ""
    return info, student if student and valid_student_id(student) else ""


def _survey(entries, names: EntryNames, most: int) -> tuple[set[str], dict]:
    """Before anything is read: the students whose entries name more than ``most`` files
    (0: no limit), and the latest date of each student's each file. Only a file's latest
    attempt is read (an earlier one never wins), so one student's attempts of the same
    file count against no limit of the download (outside attack 39: one empty file in
    20,001 attempts left each classmate after it ungraded)."""
    latest: dict[tuple[str, str], str] = {}
    for entry in entries:
        if ATTEMPT_RECORD.search(Path(entry.filename).name):
            continue
        info, student = _whose(names, entry.filename)
        if info and info.get("file_id", "") not in NBGRADER_FILES:
            key = (student, info.get("file_id", ""))
            stamp = info.get("timestamp") or ""
            if key not in latest or stamp > latest[key]:
                latest[key] = stamp
    files = Counter(student for student, _ in latest if student)
    return {student for student, n in files.items() if most and n > most}, latest


def _choose(chosen: dict, ties: dict, student: str, info: dict, data: bytes, name: str) -> None:
    """Keep the latest attempt of each file; two at the same time are a tie."""
    stamp = info.get("timestamp") or ""
    file_id = info["file_id"]
    previous = chosen.setdefault(student, {}).get(file_id)
    if previous is None or stamp > previous[0]:
        chosen[student][file_id] = (stamp, data, name)
        ties.get(student, set()).discard(file_id)
    elif stamp == previous[0]:
        ties.setdefault(student, set()).add(file_id)


def _parse_entry(plugin, name: str) -> dict | None:
    try:
        info = plugin.collect(Path(name).name)
    except Exception:  # noqa: BLE001 - a name the pattern cannot take is that entry's problem
        return None
    return info if isinstance(info, dict) else None


# A folder import keeps nbgrader's timestamp.txt (its documented date), never its secret.


def _entry_problem(name: str, info: dict | None, check_id: bool = True) -> str | None:
    if name.startswith("/") or ".." in Path(name).parts or "\\" in name:
        return f"{_shown(name)}: a path outside the download; not extracted"
    if not info or not info.get("student_id"):
        return f"{_shown(name)}: not named like an LMS submission; not extracted"
    if check_id and not valid_student_id(info["student_id"]):
        return f"{_shown(name)}: {info['student_id'][:40]!r} is not a plain student id"
    file_id = info.get("file_id") or ""
    if not FILE_NAME.fullmatch(file_id):
        return f"{_shown(name)}: {file_id[:40]!r} is not a plain file name"
    if file_id.lower().endswith(ARCHIVE_SUFFIXES):
        return f"{_shown(name)}: an archive inside the download; archives are not opened"
    return None


def _timestamp(stamp: str) -> str | None:
    """An LMS date (2024-03-01-10-00-00 or 2024-03-01) as nbgrader's timestamp.txt, or
    None when it is no date."""
    parts = [int(p) for p in re.findall(r"\d+", stamp)][:6]
    try:
        moment = datetime(*parts, tzinfo=timezone.utc) if len(parts) >= 3 else None
    except (ValueError, OverflowError):
        moment = None
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f %Z") if moment else None


def _shown(name: str) -> str:
    return repr(name[:80])


# -- a folder of notebooks named by student ----------------------------------------------
def import_folder(
    course_root: Path, assignment: str, folder: Path, only: Iterable[str] | None = None
) -> list[Problem]:
    """Import ``<student>.ipynb`` files or ``<student>/`` folders. A folder's own
    ``timestamp.txt`` is the submission's date; a submission without one has no date (no
    late penalty, and never an older attempt's)."""
    config = load_course_config(course_root)
    gate = Gate(course_root, only)
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
            problem = _not_plain(student, f"{entry.name[:80]!r}, skipped")
            if gate.chosen(problem[0]):
                problems.append(problem)
            continue
        if gate.chosen(student):
            found.setdefault(student, []).append(entry)
    taken, clashes = gate.clashes(found)
    problems += clashes + gate.left_out_note(f"{folder.name}/")
    for student, entries in sorted(found.items()):
        if student not in taken:
            continue
        if len(entries) > 1:
            names = " and ".join(
                e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries
            )
            problems.append(
                (
                    student,
                    NEEDS_REVIEW,
                    f"both {names} are in the folder: neither was taken; keep one",
                )
            )
            _remove_folder(course_root / "submitted" / student / assignment)
            continue
        entry = entries[0]
        if entry.is_dir(follow_symlinks=False):
            files, refused = safefiles.regular_files(
                Path(entry.path),
                each,
                total_limit,
                limit_count=max_files(config),
                uncounted=NBGRADER_FILES,
            )
        else:
            files, refused = {}, []
            try:
                files[notebooks[0] if len(notebooks) == 1 else entry.name] = safefiles.read_bytes(
                    Path(entry.path), each
                )
            except safefiles.Unsafe as exc:
                refused.append(str(exc))
        if refused:
            problems.append((student, INVALID_NOTEBOOK, "not taken: " + "; ".join(refused[:3])))
            _remove_folder(course_root / "submitted" / student / assignment)
            continue
        if files.pop(NBGRADER_FILES[1], None) is not None:
            log.warning(
                "%s: their folder's %s was left out (a new one is made)", student, NBGRADER_FILES[1]
            )
        safefiles.replace_folder(course_root / "submitted" / student / assignment, files)
    return problems


def _remove_folder(dest: Path) -> None:
    """An import that cannot say which attempt is the student's leaves none to grade."""
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)


MAX_PROBLEMS_LISTED = 10  # a student's import problems said and kept; the rest counted


def summarized(problems: list[Problem]) -> list[Problem]:
    """At most ``MAX_PROBLEMS_LISTED`` problems for each student (and for entries that name
    none), then one note of how many there were; a fate past them is kept (the last). One
    student's 20,000 undatable exchange folders made every collect take three minutes,
    growing with their square, and would have buried the class's own lines (attack 22)."""
    seen: dict[str, int] = {}
    out: list[Problem] = []
    last_fate: dict[str, Problem] = {}
    for problem in problems:
        student = problem[0]
        seen[student] = seen.get(student, 0) + 1
        if seen[student] <= MAX_PROBLEMS_LISTED:
            out.append(problem)
        elif problem[1] != NOTE:
            last_fate[student] = problem
    for student, count in seen.items():
        if count > MAX_PROBLEMS_LISTED:
            if student in last_fate:
                out.append(last_fate[student])
            whose = f"{student}'s entries" if student else "entries that name no student"
            out.append(
                (
                    student,
                    NOTE,
                    f"{count} problems with {whose} in all; the first "
                    f"{MAX_PROBLEMS_LISTED} are listed",
                )
            )
    return out


def record_problems(course_root: Path, assignment: str, problems: list[Problem]) -> None:
    """Put import problems in the ledger, so the report gives those students a fate."""
    from autograder.coordinator.ledger import Ledger
    from autograder.fates import Outcome

    ledger = Ledger(course_root, assignment)
    for student, fate, message in problems:
        if student and fate == NOTE:
            ledger.add_note(student, message)
        elif student:
            ledger.put(Outcome(student, fate, 0.0, None, [message]).as_dict())
