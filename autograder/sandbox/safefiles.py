"""Reading files that someone else could have shaped: never through a link, never a
FIFO or a device, never without a size bound.

Submissions, zip entries, exchange folders and staged copies are all read through here.
A path is opened with ``O_NOFOLLOW | O_NONBLOCK`` relative to a folder that was itself
opened without following links, and must then be a regular file (``fstat``): a link
planted in its place is refused, a FIFO cannot hang the batch, and a file larger than the
bound is refused before it is read.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Collection
from pathlib import Path

from autograder.printable import printable

FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
MAX_DEPTH = 8


class Unsafe(Exception):
    """Not a regular file we may read (a link, a FIFO, too large...); says which and why."""


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, refusing links, non-regular files and files over ``limit``."""
    try:
        fd = os.open(path, FLAGS)
    except OSError as exc:
        if exc.errno in (40, 20):  # ELOOP: a link; ENOTDIR: a link above it
            raise Unsafe(f"{printable(Path(path).name)} is a link") from None
        raise Unsafe(f"{printable(Path(path).name)} cannot be read ({exc.strerror})") from None
    return _read_fd(fd, printable(Path(path).name), limit)


def _read_fd(fd: int, name: str, limit: int) -> bytes:
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unsafe(f"{name} is not a regular file")
        if info.st_size > limit:
            raise Unsafe(f"{name} is larger than {limit // 1000} kB")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise Unsafe(f"{name} is larger than {limit // 1000} kB")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def regular_files(
    folder: Path,
    limit_each: int,
    limit_total: int,
    skip=lambda rel: False,
    limit_count: int = 0,
    uncounted: Collection[str] = (),
) -> tuple[dict[str, bytes], list[str]]:
    """Every regular file under ``folder`` (relative path -> bytes), and what was refused.

    Links, FIFOs, devices and sockets are refused and named, never followed or opened;
    so are files over ``limit_each`` and whatever passes ``limit_total``. Past
    ``limit_count`` names (files, folders and the rest, but not the paths in
    ``uncounted``; 0: no limit) nothing more is read, and that is refused too.
    """
    files: dict[str, bytes] = {}
    refused: list[str] = []
    total = 0
    seen = 0

    def too_many() -> _TooMany:
        return _TooMany(f"more than {limit_count:,} files and folders{COUNT_SETTING}")

    def listing(dir_fd: int, rel: str) -> list[os.DirEntry]:
        """The folder's entries but the skipped ones, by name. Listed no further than the
        count allows: a folder of a million names is refused after ``limit_count`` of them,
        never listed whole (nor sorted) first."""
        entries, counted = [], seen
        with os.scandir(dir_fd) as found:
            for entry in found:
                path = f"{rel}{entry.name}"
                if skip(path):
                    continue
                entries.append(entry)
                counted += path not in uncounted
                if limit_count and counted > limit_count:
                    raise too_many()
        return sorted(entries, key=lambda e: e.name)

    def walk(dir_fd: int, rel: str, depth: int) -> None:
        nonlocal total, seen
        for entry in listing(dir_fd, rel):
            path = f"{rel}{entry.name}"
            shown = printable(path)  # a name the student chose, in a message
            seen += path not in uncounted
            if limit_count and seen > limit_count:
                raise too_many()
            if entry.is_symlink():
                refused.append(f"{shown} is a link")
            elif entry.is_dir(follow_symlinks=False):
                if depth >= MAX_DEPTH:
                    refused.append(f"{shown}: folders nested too deeply")
                    continue
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=dir_fd)
                try:
                    walk(sub, path + "/", depth + 1)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                try:
                    data = _read_fd(os.open(entry.name, FLAGS, dir_fd=dir_fd), shown, limit_each)
                except (Unsafe, OSError) as exc:
                    refused.append(str(exc))
                    continue
                total += len(data)
                if total > limit_total:
                    refused.append(f"{shown}: the files pass {limit_total // 1000} kB in all")
                    continue
                files[path] = data
            else:
                refused.append(f"{shown} is not a regular file")

    try:
        top = os.open(folder, DIR_FLAGS)
    except OSError as exc:
        raise Unsafe(f"{Path(folder).name} is not a folder we may read ({exc.strerror})") from None
    try:
        walk(top, "", 0)
    except _TooMany as exc:
        refused.append(str(exc))
    finally:
        os.close(top)
    return files, refused


# Where the count comes from, for the person who reads the refusal.
COUNT_SETTING = " (c.SubmissionLimits.max_files)"


class _TooMany(Exception):
    """Ends a walk that passed its count of names."""


def umask() -> int:
    """This process's umask, read without changing it (``os.umask`` would, for a moment,
    for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


# The grader's own copies (the source, hidden tests and solutions included; a student's
# submission): no kernel reads them, and their folders' names can be learnt by anyone on
# the machine (a sandbox's binds are in /proc/<pid>/mountinfo, attack 22).
PRIVATE = 0o600


def write_tree(dest: Path, files: dict[str, bytes], mode: int = 0o644) -> None:
    """Write files into ``dest``, a folder this process just made (nobody else has it).
    Folders are 0755 and files ``mode``, whatever the umask: a grading worker's umask is
    077, and these are what its kernels, other users, read. A ``mode`` that others may
    not read (``PRIVATE``) makes the folders 0700 too."""
    folders = 0o755 if mode & 0o004 else 0o700
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(folders)
    for rel, data in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(dest).parents:
            (dest / parent).chmod(folders)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        os.fchmod(fd, mode)  # this mode, whatever the umask (a grading worker's is 077)
        with os.fdopen(fd, "wb") as f:
            f.write(data)


def replace_folder(dest: Path, files: dict[str, bytes]) -> None:
    """Make ``dest`` hold exactly ``files``: a new folder, then a rename over the old."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=".incoming-", dir=dest.parent))
    shutil.rmtree(fresh)
    write_tree(fresh, files, mode=0o644 & ~umask())  # as the user's umask says
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    fresh.rename(dest)
