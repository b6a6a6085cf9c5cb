"""Logging for course-grade: one tree of loggers, ``autograder``, in every process that
grades (each module logs to ``logging.getLogger(__name__)``).

- By default the instructor's terminal gets the grader's own warnings only; nbgrader's
  lines for each submission go, as before, to that submission's details in the report.
- ``course-grade --debug``: everything, nbgrader's own lines (``autograder.nbgrader.*``)
  included, on stderr.
- ``course-grade --log-file PATH``: everything, appended to PATH by the coordinator and by
  each worker process of the local pool (each line names its process), with full
  tracebacks of the grader's own errors.
- ``kill -USR2 PID`` of the coordinator or of a worker: that process writes every one of
  its threads' Python stacks on stderr and goes on (``faulthandler``), to see where a run
  that seems stuck is waiting. The kernels are other programs: never send it to them.

The settings reach the local pool's workers through the environment (``ENV``), which
spawned processes inherit (kernels get an environment of their own, without it). On a
Dask cluster a worker's lines go wherever that worker's own logging sends them.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import signal
import sys

from autograder.printable import printable

ENV = "COURSE_GRADE_LOG"
ROOT = "autograder"
NBGRADER = "autograder.nbgrader"
FORMAT = "%(asctime)s %(processName)s %(name)s %(levelname)s: %(message)s"
_OURS = "_course_grade_handler"


class PrintableFormatter(logging.Formatter):
    """Each line's message with its control characters escaped (``autograder.printable``):
    a line may quote a name a student chose (an exchange folder's date, a file), and none
    reaches the terminal or the log file as a control sequence. A traceback after it is
    the grader's own, and keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)


def configure(debug: bool = False, log_file: str | os.PathLike | None = None) -> None:
    """Set this process's handlers, and those of the workers it will start."""
    os.environ[ENV] = json.dumps({"debug": debug, "file": str(log_file or "")})
    _apply(debug, str(log_file or ""))


def configure_from_env() -> None:
    """In a worker process: the coordinator's settings, if it made any."""
    try:
        settings = json.loads(os.environ.get(ENV, ""))
    except ValueError:
        return
    _apply(bool(settings.get("debug")), str(settings.get("file") or ""))


def _apply(debug: bool, log_file: str) -> None:
    # Where it waits, on request, for a run that seems stuck: on fd 2, which stays open.
    faulthandler.register(signal.SIGUSR2, file=2, all_threads=True, chain=False)
    root = logging.getLogger(ROOT)
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.DEBUG)
    root.propagate = False
    formatter = PrintableFormatter(FORMAT)
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setLevel(logging.DEBUG if debug else logging.WARNING)
    if not debug:  # nbgrader's lines are each submission's details, not the terminal's
        terminal.addFilter(lambda record: not record.name.startswith(NBGRADER))
    handlers: list[logging.Handler] = [terminal]
    if log_file:
        handlers.append(logging.FileHandler(log_file, mode="a", encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(formatter)
        setattr(handler, _OURS, True)
        root.addHandler(handler)
