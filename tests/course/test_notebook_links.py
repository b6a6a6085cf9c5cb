"""scripts/sync-links: README badges and set-up cells follow pyproject's Repository URL."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
import tomllib
from units import UNITS

MOVED = "https://github.com/another-owner/renamed-course"
COPIED = ["pyproject.toml", "README.md", "notebooks", "source", "release"]


def first_code_cell(notebook) -> str:
    return next("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")


def sync_links(root, *args):
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "sync-links"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def checkout(root, tmp_path):
    """The parts sync-links reads and writes, copied so the test can move the repo."""
    for part in COPIED + ["scripts"]:
        source = root / part
        if source.is_dir():
            shutil.copytree(source, tmp_path / part)
        elif source.exists():
            shutil.copy2(source, tmp_path / part)
    return tmp_path


def move_repository(checkout, url):
    pyproject = checkout / "pyproject.toml"
    text, count = re.subn(
        r'(?m)^Repository = ".*"$', f'Repository = "{url}"', pyproject.read_text()
    )
    assert count == 1, "pyproject.toml should have one `Repository = ...` line"
    pyproject.write_text(text)


def test_readme_and_notebooks_are_in_step_with_pyproject(root):
    result = sync_links(root, "--check")
    assert result.returncode == 0, result.stderr


def _table(readme: str) -> list[str]:
    return (
        readme.split("<!-- BEGIN BADGES", 1)[1].split("<!-- END BADGES -->", 1)[0].splitlines()[1:]
    )


@pytest.mark.parametrize("unit", UNITS)
def test_readme_lists_every_unit_in_course_order_with_level_time_and_badges(root, unit):
    readme = (root / "README.md").read_text()
    rows = [row for row in _table(readme) if row.startswith("| ") and row[2].isdigit()]
    assert len(rows) == len(UNITS)
    row = rows[UNITS.index(unit)]
    with open(root / "pyproject.toml", "rb") as file:
        repository = tomllib.load(file)["project"]["urls"]["Repository"]
    slug = repository.removeprefix("https://github.com/")
    header = "".join(
        json.loads((root / "notebooks" / f"{unit}.ipynb").read_text())["cells"][0]["source"]
    )
    title = header.splitlines()[0].removeprefix("# ").strip()
    assert row.startswith(
        f"| {UNITS.index(unit) + 1} | [{title}](notebooks/{unit}.ipynb) | intermediate | "
    )
    for notebook in [f"notebooks/{unit}.ipynb", f"release/{unit}/{unit}.ipynb"]:
        assert (root / notebook).is_file(), f"{notebook} is missing"
        assert f"(https://colab.research.google.com/github/{slug}/blob/main/{notebook})" in row
        assert f"(https://mybinder.org/v2/gh/{slug}/HEAD?urlpath=lab/tree/{notebook})" in row


def test_the_table_follows_a_lessons_header(checkout):
    lesson = checkout / "notebooks" / "gpu_training.ipynb"
    lesson.write_text(
        lesson.read_text().replace("about 40 minutes, and 4 more", "about 30 minutes, and 4 more")
    )
    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1 and "README.md: the table of units" in check.stderr
    assert sync_links(checkout, "--root", str(checkout)).returncode == 0
    assert (
        "| intermediate | 30 min, and 4 more to go further |"
        in (checkout / "README.md").read_text()
    )


def test_check_refuses_a_lesson_that_is_not_a_unit(checkout):
    (checkout / "notebooks" / "extra.ipynb").write_text(
        (checkout / "notebooks" / "gpu_tensors.ipynb").read_text()
    )
    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1
    assert (
        "notebooks/extra.ipynb is not a unit: add 'extra' to [tool.gpucourse] units" in check.stderr
    )


def test_check_refuses_a_header_without_its_level(checkout):
    lesson = checkout / "notebooks" / "gpu_training.ipynb"
    lesson.write_text(lesson.read_text().replace("**Level:** Intermediate", "Intermediate"))
    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1
    assert "notebooks/gpu_training.ipynb: its first cell must be the header" in check.stderr


def test_check_names_every_drift_and_a_sync_repairs_it(root, checkout):
    move_repository(checkout, MOVED)
    notebooks = sorted(p.relative_to(checkout).as_posix() for p in checkout.glob("**/*.ipynb"))
    assert notebooks, "no notebooks to check"

    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1
    assert MOVED in check.stderr
    for name in ["README.md", *notebooks]:
        assert name in check.stderr, f"--check did not name {name}:\n{check.stderr}"

    assert sync_links(checkout, "--root", str(checkout)).returncode == 0
    again = sync_links(checkout, "--check", "--root", str(checkout))
    assert again.returncode == 0, again.stderr
    assert "/v2/gh/another-owner/renamed-course/HEAD" in (checkout / "README.md").read_text()
    moved_colab = "https://colab.research.google.com/github/another-owner/renamed-course/blob/main/"
    for name in notebooks:
        cell = first_code_cell(json.loads((checkout / name).read_text()))
        assert f'"gpucourse @ git+{MOVED}"' in cell, name
        # The rewrite touches the install line, and the Colab links in the text, and nothing else.
        before = (root / name).read_text().splitlines()
        after = (checkout / name).read_text().splitlines()
        changed = [(old, new) for old, new in zip(before, after) if old != new]
        assert len(before) == len(after), name
        installs = [new for _, new in changed if "%pip install" in new and MOVED in new]
        links = [new for _, new in changed if moved_colab in new]
        assert len(installs) == 1 and len(installs) + len(links) == len(changed), name
    # Each lesson's links to its exercises and to the other units, which must work on Colab,
    # moved with the repository.
    for unit in UNITS:
        lesson = (checkout / "notebooks" / f"{unit}.ipynb").read_text()
        assert f"{moved_colab}release/{unit}/{unit}.ipynb" in lesson
        assert "gpu-course/pytorch-tensors-on-the-gpu" not in lesson
    assert (
        f"{moved_colab}notebooks/gpu_tensors.ipynb"
        in (checkout / "notebooks" / "gpu_training.ipynb").read_text()
    )
    assert (
        f"{moved_colab}notebooks/gpu_training.ipynb"
        in (checkout / "notebooks" / "gpu_tensors.ipynb").read_text()
    )


def test_check_refuses_a_colab_link_to_a_file_the_repository_lacks(checkout):
    lesson = checkout / "notebooks" / "gpu_tensors.ipynb"
    lesson.write_text(
        lesson.read_text().replace(
            "blob/main/release/gpu_tensors/gpu_tensors.ipynb", "blob/main/release/gone/gone.ipynb"
        )
    )
    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1
    assert (
        "points to release/gone/gone.ipynb, which is not a file of this repository" in check.stderr
    )


def test_check_refuses_a_notebook_without_the_setup_cell(checkout):
    release = checkout / "release" / "gpu_tensors" / "gpu_tensors.ipynb"
    notebook = json.loads(release.read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    notebook["cells"].remove(code[0])
    release.write_text(json.dumps(notebook))

    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1
    assert "release/gpu_tensors/gpu_tensors.ipynb" in check.stderr
    assert "first code cell must be the Colab set-up cell" in check.stderr


def test_a_bad_repository_url_is_a_clear_error(checkout):
    move_repository(checkout, "git@github.com:gpu-course/x.git")
    check = sync_links(checkout, "--check", "--root", str(checkout))
    assert check.returncode == 1
    assert "[project.urls] Repository must be https://github.com/<owner>/<name>" in check.stderr
