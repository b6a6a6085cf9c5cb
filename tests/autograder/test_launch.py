"""course-grade's entry point starts the local pool's fork server before the coordinator
imports what it grades with, so that the two imports run side by side
(``autograder.coordinator.launch``); runs that grade on no local pool start none."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autograder.coordinator import launch

# In a fresh interpreter: the fork server's pid (None: not started) at the moment the
# coordinator's command line module is first imported, and course-grade's exit status.
PROBE = """
import importlib.abc, json, sys
from multiprocessing import forkserver

seen = {}

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "autograder.coordinator.cli" and "cli" not in seen:
            seen["cli"] = forkserver._forkserver._forkserver_pid
        return None

sys.meta_path.insert(0, Watch())
from autograder.coordinator import launch

status = launch.main(json.loads(sys.argv[1]))
print(json.dumps([seen.get("cli"), status]))
"""


@pytest.mark.parametrize(
    "args, early",
    [
        ([], True),
        (["--jobs", "2"], True),
        (["--report-only"], False),
        (["--scheduler", "tcp://127.0.0.1:1"], False),
        (["--scheduler=tcp://127.0.0.1:1"], False),
    ],
)
def test_the_fork_server_starts_before_the_coordinator_imports_only_for_a_local_pool(
    tmp_path, args, early
):
    import json

    missing = tmp_path / "no-course"  # course-grade stops at once: no such course (status 2)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["gpu_tensors", "--course", str(missing), *args])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    pid, status = json.loads(out.stdout.splitlines()[-1])
    assert status == 2, out.stderr
    assert (pid is not None) == early


def test_the_guess_reads_options_as_argparse_does_with_a_value_after_an_equals_sign():
    assert launch.grades_on_a_local_pool(["gpu_tensors", "--collect"])
    assert not launch.grades_on_a_local_pool(["--help"])
    assert not launch.grades_on_a_local_pool(["--scheduler=tcp://h:8786", "--all"])


def test_ctrl_c_while_it_starts_says_nothing_changed_and_exits_130(monkeypatch, capsys):
    from autograder.coordinator import fork_server

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(fork_server, "start", interrupted)
    assert launch.main(["gpu_tensors"]) == 130
    assert "interrupted as it started; nothing was changed" in capsys.readouterr().err
