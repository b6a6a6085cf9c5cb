"""nbgrader's process-wide state, made safe for several grading threads in one process.

A Dask worker started with its defaults (``dask worker tcp://...``) runs one thread per
core, each grading its own submission with nbgrader's converters. Two things nbgrader
does to the whole process would then cross two submissions:

- ``BaseConverter.start`` changes the process's working folder to the course folder and
  back: with two threads, one thread "goes back" to the other's folder, which may be gone
  by then (and a relative path would resolve in another submission's course). Every
  course folder a worker uses has an absolute root, so no working folder is needed:
  ``install`` makes ``start`` do nbgrader's steps without changing it.
- ``utils.setenv`` sets ``NBGRADER_EXECUTION`` for the run and deletes it after: the
  second thread to finish found it gone (``KeyError``). It is now counted: set while any
  thread needs it, restored when the last one is done.

- CPython 3.11's ``ast`` keeps one recursion count for the whole interpreter while it
  builds a tree: when two threads parse at once (the test plan reads the test cells,
  the trusted side reads the test kernel's replies with ``ast.literal_eval``), one may
  fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython issue
  gh-106905; seen as a submission's ``error`` on a two-thread Dask worker). ``install``
  makes ``ast.parse``, which ``literal_eval`` calls, take a lock.

Each converter also logs to a logger of its own per thread (``worker._run_nbgrader``), so
one job's error details never hold another's lines.
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
import threading

from autograder.worker import limited_child

_LOCK = threading.Lock()
_HELD: dict[str, tuple[int, str | None]] = {}  # key -> (threads holding it, value before)
_INSTALLED: list[bool] = []


@contextlib.contextmanager
def counted_setenv(**values: str):
    """nbgrader's ``utils.setenv``, safe when threads overlap (all set the same value)."""
    with _LOCK:
        for key, value in values.items():
            count, before = _HELD.get(key, (0, os.environ.get(key)))
            _HELD[key] = (count + 1, before)
            os.environ[key] = value
    try:
        yield
    finally:
        with _LOCK:
            for key in values:
                count, before = _HELD.pop(key)
                if count > 1:
                    _HELD[key] = (count - 1, before)
                elif before is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = before


def _start_in_place(self) -> None:
    """``BaseConverter.start`` without changing the process's working folder (the course
    root is absolute: nothing here is relative to it)."""
    from nbgrader.converters.base import FilesWriter

    if not os.path.isabs(self.coursedir.root):
        return _ORIGINAL_START[0](self)
    self.init_notebooks()
    self.writer = FilesWriter(parent=self, config=self.config)
    self.exporter = self.exporter_class(parent=self, config=self.config)
    for pp in self.preprocessors:
        self.exporter.register_preprocessor(pp)
    self.convert_notebooks()


_ORIGINAL_START: list = []
_AST_LOCK = threading.Lock()
_ORIGINAL_PARSE: list = []


def _parse_alone(*args, **kwargs):
    """``ast.parse``, one thread at a time."""
    with _AST_LOCK:
        return _ORIGINAL_PARSE[0](*args, **kwargs)


def install() -> None:
    """Patch nbgrader, once per process (grading workers only)."""
    with _LOCK:
        if _INSTALLED:
            return
        from nbgrader import utils
        from nbgrader.converters.base import BaseConverter

        _ORIGINAL_START.append(BaseConverter.start)
        _ORIGINAL_PARSE.append(ast.parse)
        ast.parse = _parse_alone
        BaseConverter.start = _start_in_place
        utils.setenv = counted_setenv
        _INSTALLED.append(True)


limited_child.fresh_locks(sys.modules[__name__], "_LOCK", "_AST_LOCK")
