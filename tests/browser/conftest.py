"""JupyterLab in Debian's chromium: Playwright's launch settings and a lab server.

The browser is always ``/usr/bin/chromium`` (``scripts/setup --system`` installs it);
Playwright never downloads one. The lab server runs on 127.0.0.1 with a random token,
in a temporary copy of the course, with its own config, runtime, settings and
workspace folders, and is stopped when the session ends.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# Root needs --no-sandbox; the rest keeps chromium off the (closed) network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# What a learner's checkout holds that the browser tests open.
COURSE_PARTS = ["notebooks", "source", "release", "nbgrader_config.py"]
STARTUP_SECONDS = 90
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: run `scripts/setup --system` (it installs "
            "Debian's chromium); the browser tests never download a browser"
        )
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@dataclass(frozen=True)
class Lab:
    base: str  # e.g. http://127.0.0.1:8931/
    token: str
    root: Path  # the server's root_dir: a temporary copy of the course

    def url(self, path: str) -> str:
        """A page of this server, e.g. ``lab/tree/notebooks/x.ipynb``, with the token."""
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def get(self, path: str) -> tuple[int, str]:
        request = urllib.request.Request(
            self.base + path, headers={"Authorization": f"token {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8", "replace")


@pytest.fixture(scope="session")
def lab(root, tmp_path_factory):
    """One JupyterLab for the browser session, rooted in a copy of the course."""
    home = tmp_path_factory.mktemp("lab")
    course = home / "course"
    course.mkdir()
    for part in COURSE_PARTS:
        source = root / part
        if source.is_dir():
            shutil.copytree(source, course / part)
        elif source.exists():
            shutil.copy2(source, course / part)
    server = _start_lab(course, home)
    try:
        yield server.lab
    finally:
        server.stop()


@dataclass
class _Server:
    lab: Lab
    process: subprocess.Popen
    log: object  # the open file the server writes its log to

    def stop(self):
        # Lab's own shutdown also stops its kernels; kill only if it hangs.
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                # Its own session: this reaches the kernels it started, too.
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


def _start_lab(course: Path, home: Path) -> _Server:
    token = secrets.token_hex(16)
    port = _free_port()
    env = _lab_env(home)
    log_path = home / "jupyter-lab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--allow-root",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={course}",
        "--ServerApp.port_retries=0",
        # Nothing reaches the internet: no news feed, no update check.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = open(log_path, "wb")
    process = subprocess.Popen(
        command, cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    server = _Server(Lab(f"http://127.0.0.1:{port}/", token, course), process, log)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if server.lab.get("api/status")[0] == 200:
                return server
        except OSError:
            pass
        time.sleep(0.5)
    server.stop()
    tail = log_path.read_text(errors="replace")[-4000:]
    pytest.fail(
        f"jupyter lab did not answer /api/status within {STARTUP_SECONDS} s "
        f"(exit code {process.poll()}); its log ends:\n{tail}"
    )


def _lab_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in (
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_RUNTIME_DIR",
        "JUPYTERLAB_SETTINGS_DIR",
        "JUPYTERLAB_WORKSPACES_DIR",
        "JUPYTER_DATA_DIR",
        "IPYTHONDIR",
    ):
        folder = home / name.lower()
        folder.mkdir()
        env[name] = str(folder)
    # The kernel is the venv's: its python and jupyter come first on PATH.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    _write_lab_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]))
    return env


def _write_lab_settings(settings: Path):
    # No news toast or update check to cover the notebook in screenshots.
    notification = settings / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
