"""Run a command as an ordinary Unix user, from root.

This machine's Python lives under /root (mode 0700). The command runs under ``setpriv``
inside an outer bwrap that opens only that Python to the user, the way a laptop's Python
is open to its user. Run by anyone but root, the command runs as that user, unchanged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_as(
    uid: int, gid: int, argv: list[str], env: dict, cwd: Path | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    outer: list[str] = []
    if os.geteuid() == 0:
        python_home = os.path.realpath(sys.base_prefix).split("/versions/")[0]
        outer = [
            "bwrap",
            "--dev-bind",
            "/",
            "/",
            "--perms",
            "0755",
            "--tmpfs",
            "/root",
            "--ro-bind",
            python_home,
            python_home,
            *(["--chdir", str(cwd)] if cwd else []),
            "--",
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
        ]
    return subprocess.run(
        outer + argv,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=None if outer else cwd,
    )
