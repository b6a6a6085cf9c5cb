"""The README's run command serves the course and opens the lesson first."""

import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from units import UNITS

pytestmark = pytest.mark.slow

TOKEN = "run-course-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=5) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers
    except urllib.error.URLError:  # not listening yet
        return None, None


@pytest.fixture
def course_server(root, tmp_path):
    port = _free_port()
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [
            str(root / "scripts" / "run-course"),
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while _get(f"{base}/api/status?token={TOKEN}")[0] != 200:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "JupyterLab did not answer within 120 s"
            time.sleep(0.5)
        yield base, tmp_path / "server.log"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_run_course_serves_the_course_and_opens_the_lesson(course_server, root):
    base, log = course_server
    status, headers = _get(f"{base}/?token={TOKEN}")
    assert status in (301, 302), status
    assert headers["Location"].split("?")[0].endswith("/lab/tree/notebooks/gpu_tensors.ipynb")
    # The whole course is served, so each lesson's links to its exercises and to the other
    # units work.
    for path in [
        f"{folder}{unit}.ipynb" for unit in UNITS for folder in ("notebooks/", f"release/{unit}/")
    ]:
        assert _get(f"{base}/api/contents/{path}?content=0&token={TOKEN}")[0] == 200, path
    served = re.search(r"Serving notebooks from local directory: (\S+)", log.read_text())
    assert served and os.path.samefile(served.group(1), root)
