"""nbgrader's ``utils.is_ignored`` without a listing of the folder for every file.

Threat: nbgrader's autograde and generate_feedback copy a submission's files with
``utils.find_all_files``, which asks ``is_ignored`` of every file and folder; for each of
``CourseDirectory.ignore``'s patterns ``is_ignored`` globs the file's whole folder and
looks for the file among the matches. A folder of N files costs N listings of N names:
an outside attack's 8,000 empty files (under every byte limit) held a grading worker 77 s,
20,000 files 490 s, outside every limit a kernel has (attack 38).

``is_ignored`` here gives nbgrader's answer from the file's own name: a file is ignored
when a pattern matches its name as ``glob`` would match it in its folder (``fnmatch``'s
rules, case-sensitive; a name starting with "." only by a pattern that does; a pattern
without wildcards by equality). Where nbgrader's answer depends on more than the name (a
folder whose own name has wildcard characters, which ``glob`` reads as a pattern; a path
that ``os.path.join`` would write otherwise), nbgrader's own function answers. ``install``
replaces it in ``nbgrader.utils``, whose ``find_all_files`` looks it up at each call.
"""

from __future__ import annotations

import fnmatch
import glob
import os

_ORIGINAL: list = []


def is_ignored(filename: str, ignore_globs: list[str] | None = None) -> bool:
    if ignore_globs is None:
        return False
    dirname, name = os.path.split(filename)
    if not name or glob.has_magic(dirname) or os.path.join(dirname, name) != filename:
        return _nbgraders()(filename, ignore_globs)
    for expr in ignore_globs:
        if _matches(name, expr):
            return True
    return False


def _matches(name: str, expr: str) -> bool:
    """Whether ``glob.glob(os.path.join(folder, expr))`` lists ``folder/name`` (which exists)."""
    if os.sep in expr or (os.altsep and os.altsep in expr):
        return False  # a pattern of a subfolder never lists a file of this folder
    if not glob.has_magic(expr):
        return expr == name
    if name.startswith(".") and not expr.startswith("."):
        return False  # glob's rule for hidden names
    return fnmatch.fnmatchcase(name, expr)


def _nbgraders():
    """nbgrader's own ``is_ignored``, installed or not."""
    from nbgrader import utils

    if not _ORIGINAL:
        _ORIGINAL.append(utils.is_ignored)
    return _ORIGINAL[0]


def install() -> None:
    """Use this ``is_ignored`` in nbgrader (once per process)."""
    from nbgrader import utils

    _nbgraders()
    utils.is_ignored = is_ignored
