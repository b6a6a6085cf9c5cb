"""The course's configuration: nbgrader_config.py, read the way nbgrader reads it.

The CLI loads the same file nbgrader does, so the sandbox limits (``c.Sandbox.*``) sit
next to nbgrader's own options, and then adds the pieces only ``course-grade`` uses: the
two-kernel Execute, a gradebook URL with a busy timeout, and feedback that hides hidden
tests and is sanitized, whatever the course's own file says.
"""

from __future__ import annotations

from pathlib import Path

from traitlets import Integer
from traitlets.config import Config, Configurable
from traitlets.config.loader import PyFileConfigLoader

CONFIG_FILE = "nbgrader_config.py"
# Seconds a gradebook writer waits for another's lock before SQLite says "locked".
SQLITE_BUSY_TIMEOUT = 120


def load_course_config(course_root: Path) -> Config:
    config = Config()
    path = Path(course_root) / CONFIG_FILE
    if path.exists():
        config.merge(PyFileConfigLoader(CONFIG_FILE, path=str(course_root)).load_config())
    config.CourseDirectory.root = str(Path(course_root).resolve())
    return config


def jupyter_config() -> Config:
    """The ``nbgrader_config.py`` files of Jupyter's config path, merged as nbgrader's apps
    merge them: /etc/jupyter (and the other system folders) below the environment's, below
    ~/.jupyter (``JUPYTER_CONFIG_DIR``). nbgrader then loads the course folder's file over
    them; ``exchange_config`` does the same."""
    import os

    from jupyter_core.paths import jupyter_config_dir, jupyter_config_path

    paths = jupyter_config_path()
    if jupyter_config_dir() not in paths:
        paths.insert(0, jupyter_config_dir())
    config = Config()
    for folder in reversed(paths):  # the first has the last word
        if os.path.isfile(os.path.join(folder, CONFIG_FILE)):
            config.merge(PyFileConfigLoader(CONFIG_FILE, path=folder).load_config())
    return config


def exchange_config(course_root: Path) -> Config:
    """The config ``--collect`` uses: what plain ``nbgrader collect`` run in the course
    folder reads (Jupyter's config path, then the course's file), so both find the same
    exchange (``c.Exchange.root``, e.g. set for everyone in /etc/jupyter)."""
    config = jupyter_config()
    config.merge(load_course_config(course_root))
    return config


def exchange_timezone(config: Config) -> str:
    """The zone nbgrader's exchange writes its dates in (``c.ExchangeSubmit.timezone``, else
    ``c.Exchange.timezone``; nbgrader's default is UTC)."""
    for section in ("ExchangeSubmit", "Exchange"):
        if section in config and "timezone" in config[section]:
            return str(config[section]["timezone"])
    return "UTC"


def gradebook_url(config: Config, course_root: Path) -> str:
    url = (
        config.CourseDirectory.get("db_url")
        or f"sqlite:///{Path(course_root).resolve()}/gradebook.db"
    )
    if url.startswith("sqlite") and "timeout=" not in url:
        url += ("&" if "?" in url else "?") + f"timeout={SQLITE_BUSY_TIMEOUT}"
    return url


def file_limits(config: Config) -> tuple[int, int]:
    """Bytes per file and per submission folder: nbgrader's own CourseDirectory limits."""
    course = config.CourseDirectory
    return (
        int(course.get("max_file_size", 100_000)) * 1000,
        int(course.get("max_dir_size", 1_000_000)) * 1000,
    )


class SubmissionLimits(Configurable):
    """What one submission may hold besides nbgrader's byte limits
    (``CourseDirectory.max_file_size`` and ``max_dir_size``)."""

    max_files = Integer(
        1_000,
        help="Files and folders in one submission, all its folders counted. Each costs "
        "nbgrader's own steps, outside every limit of the kernels', whatever its size: a "
        "submission of more is an invalid notebook that says so (empty files pass every "
        "byte limit). 0: no limit.",
    ).tag(config=True)


def max_files(config: Config) -> int:
    """Files and folders a submission may hold (``c.SubmissionLimits.max_files``)."""
    return SubmissionLimits(config=config).max_files


def grading_config(course_root: Path) -> Config:
    """nbgrader's config for course-grade: the course's own, with our pieces on top."""
    config = load_course_config(course_root)
    config.CourseDirectory.db_url = gradebook_url(config, course_root)
    preprocessors = list(config.Autograde.get("autograde_preprocessors") or _default("autograde"))
    # nbgrader checks the cells' metadata twice: in its sanitize step, and again after
    # running them. Between the two only outputs change (the student's kernel never edits
    # the notebook), and each check validates every cell against the schema anew.
    # Each notebook's grades saved in one transaction (``autograder.save_grades``).
    swaps = {
        "Execute": "autograder.worker.execute.TwoKernelExecute",
        "SaveAutoGrades": "autograder.save_grades.SaveAutoGradesAtOnce",
        "AssignLatePenalties": "autograder.late_penalties.CheckedLatePenalties",
    }
    config.Autograde.autograde_preprocessors = [
        next((swap for name, swap in swaps.items() if _is_named(p, name)), p)
        for p in preprocessors
        if not _is_named(p, "CheckCellMetadata")
    ]
    # The sanitize step's OverwriteCells reads the source's rows once a notebook, not once
    # a cell (``autograder.notebook_rows``).
    sanitize = list(config.Autograde.get("sanitize_preprocessors") or _default("sanitize"))
    config.Autograde.sanitize_preprocessors = [
        "autograder.notebook_rows.OverwriteCellsFromOneRead"
        if _is_named(p, "OverwriteCells")
        else p
        for p in sanitize
    ]
    # nbconvert validates the whole notebook after each of autograde's preprocessors (a
    # tenth of a CPU second a submission); once, after the last, still refuses a bad one.
    config.Exporter.optimistic_validation = True
    # Execute's limits (timeout etc.) are set on nbgrader's Execute; the subclass inherits.
    from autograder.worker.feedback import configure_feedback

    configure_feedback(config)  # whatever the course's own file says
    return config


def _default(step: str) -> list:
    """nbgrader's own list of Autograde's ``step`` preprocessors (autograde, sanitize)."""
    from nbgrader.converters import Autograde

    return list(Autograde.class_traits()[f"{step}_preprocessors"].default())


def _is_named(preprocessor, name: str) -> bool:
    full = preprocessor if isinstance(preprocessor, str) else preprocessor.__name__
    return full.rsplit(".", 1)[-1] == name
