"""The course package as a learner's machine gets it: copied out of the checkout.

Environment tests install it from a copy, so nothing they build lands in the
checkout (build/, *.egg-info) and the installed package cannot come from the tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE_PARTS = ["pyproject.toml", "README.md", "LICENSE", "gpucourse", "autograder"]
IGNORED = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")


def copy_package(root: Path, dest: Path) -> Path:
    """What pip needs to build the distribution, copied from ``root`` into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in PACKAGE_PARTS:
        source = root / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=IGNORED)
        else:
            shutil.copy2(source, dest / part)
    return dest


def run(command, *, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """Run a command; on failure, fail with its output's tail rather than a bare code."""
    result = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=timeout, **kwargs
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr)[-4000:]
        raise AssertionError(f"{' '.join(map(str, command))} exited {result.returncode}:\n{output}")
    return result


def pip(python: Path, *args, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """The development venv's pip, acting on another venv's ``python``."""
    return run(
        [sys.executable, "-m", "pip", "--python", python, *args, "--quiet"],
        timeout=timeout,
        **kwargs,
    )
