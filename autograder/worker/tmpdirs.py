"""Where a grading worker makes its folders: copies of the course (solutions, hidden
tests, a gradebook), each job's scratch folder (the submission, the autograded notebook)
and its kernels' folders.

A local pool's coordinator makes one run folder, ``/tmp/cg-run-<its pid>-*``, and every
worker of that pool makes its folders inside it (``use``): however a worker ends (Ctrl-C,
a kill, a crash before it could clean up), the coordinator removes the whole run folder
when the pool ends, and a later run removes one whose coordinator is gone (``remove_stale``).
Elsewhere (a Dask worker) the folders go straight in /tmp, each removed by its owner.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

_TMP = "/tmp"
_ROOT = _TMP
RUN_PREFIX = "cg-run-"
_RUN_NAME = re.compile(rf"{RUN_PREFIX}(\d+)-[A-Za-z0-9_]+")


def use(root: str | os.PathLike) -> None:
    """Make this process's folders inside ``root`` (a local pool's run folder)."""
    global _ROOT
    _ROOT = str(root)


def run_folder() -> Path | None:
    """The local pool's run folder this worker uses (None: not a local pool's worker)."""
    return Path(_ROOT) if _ROOT != _TMP else None


def make(prefix: str) -> Path:
    """A new private folder (mode 0700) for this worker."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_ROOT))


def new_run() -> Path:
    """A coordinator's run folder: the kernels' uids pass through it; no one lists it."""
    folder = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir="/tmp"))
    folder.chmod(0o711)
    return folder


def remove_stale() -> list[Path]:
    """Remove the run folders of this user whose coordinator is no longer running (it was
    killed before it could remove its own), and say which."""
    removed = []
    for entry in os.scandir("/tmp"):
        match = _RUN_NAME.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
            continue
        if _running(int(match.group(1))):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # never follows a link inside
        removed.append(Path(entry.path))
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
