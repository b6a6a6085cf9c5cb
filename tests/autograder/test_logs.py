"""course-grade's logging (``autograder.logs``): --debug and --log-file reach the grader's
own lines and nbgrader's, in the coordinator and in the workers it starts."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from autograder import logs
from autograder.coordinator.cli import parse_args


def test_the_options_are_parsed():
    args = parse_args(["gpu_tensors", "--debug", "--log-file", "grading.log"])
    assert args.debug and str(args.log_file) == "grading.log"
    args = parse_args(["gpu_tensors"])
    assert not args.debug and args.log_file is None


def _emit(tmp_path, *setup: str) -> subprocess.CompletedProcess:
    """In a fresh process (as a spawned worker is): configure, then log as the grader and
    as nbgrader would."""
    code = "\n".join(
        [
            "import logging",
            "from autograder import logs",
            *setup,
            "logging.getLogger('autograder.worker.worker').info('grading ada')",
            "logging.getLogger('autograder.worker.worker').warning('a warning of the grader')",
            "logging.getLogger('autograder.nbgrader.Autograde.t1').warning('nbgrader says so')",
        ]
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )


def test_by_default_the_terminal_gets_the_graders_warnings_only(tmp_path):
    run = _emit(tmp_path, "logs.configure()")
    assert "a warning of the grader" in run.stderr
    assert "grading ada" not in run.stderr and "nbgrader says so" not in run.stderr


def test_debug_shows_everything_and_a_log_file_keeps_it(tmp_path):
    log_file = tmp_path / "grading.log"
    run = _emit(tmp_path, f"logs.configure(debug=True, log_file={str(log_file)!r})")
    for line in ("grading ada", "a warning of the grader", "nbgrader says so"):
        assert line in run.stderr
        assert line in log_file.read_text()


def test_a_worker_takes_the_coordinators_settings_from_its_environment(tmp_path, monkeypatch):
    log_file = tmp_path / "grading.log"
    monkeypatch.setenv(logs.ENV, json.dumps({"debug": False, "file": str(log_file)}))
    run = _emit(tmp_path, "logs.configure_from_env()")
    text = log_file.read_text()
    assert "grading ada" in text and "nbgrader says so" in text
    assert "nbgrader says so" not in run.stderr


def test_configuring_again_does_not_double_the_lines(tmp_path):
    log_file = tmp_path / "grading.log"
    logs.configure(log_file=log_file)
    logs.configure(log_file=log_file)
    try:
        logging.getLogger("autograder.coordinator.grade").info("once")
        assert log_file.read_text().count("once") == 1
    finally:
        logs._apply(False, "")


def test_a_name_a_line_quotes_reaches_the_terminal_and_the_log_file_escaped(tmp_path):
    """A warning may quote what a student named (an exchange folder's date): its control
    sequences are escaped on the terminal and in the log file; a traceback keeps its lines
    (attack 22: a file name set the instructor's clipboard and forged a line)."""
    log_file = tmp_path / "grading.log"
    run = _emit(
        tmp_path,
        f"logs.configure(log_file={str(log_file)!r})",
        "log = logging.getLogger('autograder.coordinator.importers')",
        r"log.warning('mal: kept the submission of %s', '2026\x1b]52;c;ZWNobw==\x07\nforged')",
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    log.exception('the grader failed')",
    )
    for text in (run.stderr, log_file.read_text()):
        assert r"2026\x1b]52;c;ZWNobw==\x07\nforged" in text
        assert "\x1b" not in text and "\x07" not in text
        assert "\nZeroDivisionError: division by zero" in text  # the traceback's own lines


def test_sigusr2_writes_every_threads_stack_and_the_run_goes_on(tmp_path):
    """How a run that seems stuck says where it waits (``tests/stuck.py`` asks so)."""
    run = _emit(
        tmp_path,
        "logs.configure()",
        "import os, signal, threading, time",
        "threading.Thread(target=time.sleep, args=(0.5,), name='waits').start()",
        "os.kill(os.getpid(), signal.SIGUSR2)",
        "time.sleep(0.1)",
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("most recent call first") == 2, run.stderr
    assert "a warning of the grader" in run.stderr  # it went on after writing them
