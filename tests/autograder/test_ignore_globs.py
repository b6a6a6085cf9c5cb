"""nbgrader's ignore patterns, answered from a file's name (attack 38: a submission of
8,000 empty files held a worker 77 s, as nbgrader globbed the folder for every file)."""

from __future__ import annotations

import glob
import os

import pytest
from nbgrader import utils

from autograder.worker import ignore_globs

NAMES = [
    "gpu_tensors.ipynb",
    "notes.txt",
    "mod.pyc",
    ".hidden.pyc",
    ".ipynb_checkpoints",
    "__pycache__",
    "feedback",
    "feedbackx",
    "a[1].txt",
    "data",
    "Mod.PYC",
    "x*y",
    "q?",
]
PATTERNS = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.ipynb",
    ".*",
    "*",
    "a[1].txt",
    "a[!x]*",
    "data/*",
    "**",
    "*.PYC",
    "x*y",
    "q?",
    "[",
    "sub/notes.txt",
]


@pytest.fixture
def folder(tmp_path):
    for name in NAMES:
        (tmp_path / name).write_text("")
    weird = tmp_path / "odd[x]"  # a folder whose own name glob reads as a pattern
    weird.mkdir()
    (weird / "mod.pyc").write_text("")
    return tmp_path


@pytest.fixture(autouse=True)
def restored(monkeypatch):
    monkeypatch.setattr(utils, "is_ignored", ignore_globs._nbgraders())


def test_every_answer_is_nbgrader_s_own(folder):
    nbgraders = ignore_globs._nbgraders()
    paths = [str(folder / n) for n in NAMES] + [str(folder / "odd[x]" / "mod.pyc"), str(folder)]
    for path in paths:
        for pattern in PATTERNS:
            assert ignore_globs.is_ignored(path, [pattern]) == nbgraders(path, [pattern]), (
                path,
                pattern,
            )
        assert ignore_globs.is_ignored(path, None) is False


def test_a_file_s_answer_never_lists_its_folder(folder, monkeypatch):
    listed = []
    monkeypatch.setattr(glob, "glob", lambda *a, **k: listed.append(a) or [])
    monkeypatch.setattr(os, "scandir", lambda *a, **k: listed.append(a) or iter(()))
    for name in NAMES:
        ignore_globs.is_ignored(str(folder / name), ["*.pyc", ".ipynb_checkpoints", "feedback"])
    assert listed == []


def test_nbgrader_copies_what_it_copied_before_and_uses_it_once_installed(folder):
    patterns = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.ipynb"]
    before = sorted(utils.find_all_files(str(folder), patterns))
    ignore_globs.install()
    assert utils.is_ignored is ignore_globs.is_ignored
    assert sorted(utils.find_all_files(str(folder), patterns)) == before
    assert str(folder / "notes.txt") in before and str(folder / "mod.pyc") not in before
