"""Binder: binder/requirements.txt installs, and binder/postBuild sets nbgrader up or fails loudly.

The install is real, into a temporary venv, from a copy of the repository as
repo2docker sees it. The PyTorch CPU index is unreachable from these machines, so
its one line is dropped: the pinned `torch==...+cpu` then comes from this
machine's own CPU build (pip's configured find-links).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
import tomllib
from course_package import copy_package, pip, run
from packaging.specifiers import SpecifierSet

TORCH_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
PLUGIN = re.compile(r"@jupyter/nbgrader:[\w-]+")


def requirement_pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.split("#")[0].strip())
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_requirements_pin_cpu_torch_from_pytorchs_cpu_index(root):
    requirements = root / "binder" / "requirements.txt"
    lines = requirements.read_text().splitlines()
    assert TORCH_INDEX in lines
    assert re.fullmatch(r"\d+\.\d+\.\d+\+cpu", requirement_pins(requirements)["torch"])
    assert "." in lines or "-e ." in lines, "binder must install the course package itself"


def test_requirements_match_the_development_pins(root):
    binder = requirement_pins(root / "binder" / "requirements.txt")
    constraints = requirement_pins(root / "requirements" / "constraints.txt")
    for name in ["jupyterlab", "nbgrader", "ipywidgets"]:
        assert name in binder, f"binder/requirements.txt should pin {name}"
    for name, version in binder.items():
        if name in constraints:
            assert version.split("+")[0] == constraints[name], (
                f"{name}: binder pins {version}, requirements/constraints.txt {constraints[name]}"
            )


def test_runtime_python_meets_the_projects_requires_python(root):
    runtime = (root / "binder" / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", runtime)
    assert match, f"binder/runtime.txt should read python-X.Y, not {runtime!r}"
    with open(root / "pyproject.toml", "rb") as file:
        requires = SpecifierSet(tomllib.load(file)["project"]["requires-python"])
    assert f"{match[1]}.0" in requires, f"{runtime} is outside requires-python {requires}"


@pytest.fixture(scope="module")
def binder_env(root, tmp_path_factory):
    """A repo2docker-like checkout and a venv with binder/requirements.txt installed."""
    home = tmp_path_factory.mktemp("binder")
    repo = copy_package(root, home / "repo")
    shutil.copytree(root / "binder", repo / "binder")
    requirements = repo / "binder" / "requirements.txt"
    text = requirements.read_text()
    assert TORCH_INDEX in text
    requirements.write_text(text.replace(TORCH_INDEX, "# (PyTorch's CPU index: unreachable here)"))
    prefix = home / "venv"
    venv.create(prefix, with_pip=False)
    python = prefix / "bin" / "python"
    # --no-compile: byte-compiling torch would double the install time.
    pip(python, "install", "--no-compile", "-r", "binder/requirements.txt", cwd=repo)
    env = {
        **os.environ,
        "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
    }
    env.pop("VIRTUAL_ENV", None)
    # The first jupyter command byte-compiles what it imports, as pip would have.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return repo, prefix, env


@pytest.mark.slow
def test_requirements_install_cpu_torch_nbgrader_widgets_and_the_course(binder_env):
    repo, prefix, env = binder_env
    # Versions from the installed metadata: importing torch here would only cost time.
    probe = (
        "import importlib.metadata as m, importlib.util as u; "
        "print(*(m.version(n) for n in ['torch', 'nbgrader', 'ipywidgets', 'jupyterlab']), "
        "u.find_spec('gpucourse').origin)"
    )
    out = run(
        [prefix / "bin" / "python", "-c", probe], timeout=120, env=env, cwd=prefix
    ).stdout.split()
    torch_version, nbgrader_version, widgets_version, lab_version, package_file = out
    assert torch_version.endswith("+cpu")
    assert nbgrader_version == "0.9.6"
    assert widgets_version.startswith("8.")
    assert lab_version.startswith("4.")
    assert Path(package_file).is_relative_to(prefix), (
        "gpucourse should be installed, not read from a tree"
    )


@pytest.mark.slow
def test_postbuild_turns_on_validate_and_create_and_off_the_exchange_lists(root, binder_env):
    repo, prefix, env = binder_env
    result = run(["bash", repo / "binder" / "postBuild"], timeout=300, env=env, cwd=repo)
    assert "postBuild: nbgrader's Create Assignment and Validate are on" in result.stdout

    page_config = json.loads((prefix / "etc/jupyter/labconfig/page_config.json").read_text())
    disabled = {name for name, off in page_config["disabledExtensions"].items() if off}
    assert {"@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:course-list"} <= disabled
    assert (
        not {"@jupyter/nbgrader:validate-assignment", "@jupyter/nbgrader:create-assignment"}
        & disabled
    )

    # `labextension disable` accepts any name: the ones postBuild uses must be real plugins.
    bundle = "".join(
        p.read_text(errors="replace")
        for p in (prefix / "share/jupyter/labextensions/@jupyter/nbgrader/static").glob("*.js")
    )
    for plugin in set(PLUGIN.findall((root / "binder" / "postBuild").read_text())):
        assert f'"{plugin}"' in bundle, f"{plugin} is not a plugin of nbgrader's lab extension"


def postbuild_with_fake_jupyter(root: Path, folder: Path, script: str):
    """Run postBuild where `jupyter` is a shell ``script`` instead of the real one."""
    (folder / "bin").mkdir()
    (folder / "bin" / "jupyter").write_text(f"#!/bin/sh\n{script}\n")
    (folder / "bin" / "jupyter").chmod(0o755)
    env = {**os.environ, "PATH": f"{folder / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    return subprocess.run(
        ["bash", root / "binder" / "postBuild"],
        env=env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_postbuild_stops_at_a_failing_command_and_names_it(root, tmp_path):
    result = postbuild_with_fake_jupyter(root, tmp_path, 'echo "jupyter: broken" >&2; exit 3')
    assert result.returncode != 0
    assert "postBuild: FAILED at line" in result.stderr
    assert "jupyter labextension enable @jupyter/nbgrader:create-assignment" in result.stderr
    assert "postBuild: nbgrader's Create Assignment" not in result.stdout


def test_postbuild_fails_when_nbgrader_is_not_installed(root, tmp_path):
    # Every jupyter command "works" but lists no extensions, as without nbgrader.
    result = postbuild_with_fake_jupyter(root, tmp_path, 'echo "JupyterLab v4.6.6" >&2; exit 0')
    assert result.returncode != 0
    assert "postBuild: FAILED: lab extension @jupyter/nbgrader is not installed" in result.stderr
