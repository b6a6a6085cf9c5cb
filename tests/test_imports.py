"""Imports and the inbox, without grading: bounds, names, links and nbgrader metadata.

The attacks on imports that a student would try are cases of tests/hostile (graded with
the whole class in test_pipeline.py); here are the limits themselves.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder import importers, inbox, safefiles
from tests.submissions import RELEASE, SOLUTIONS, SOURCE, make_submission

NB = nbformat.writes(make_submission(RELEASE, SOLUTIONS)).encode()


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    (root / "source" / "gpu_tensors").mkdir(parents=True)
    (root / "source" / "gpu_tensors" / "gpu_tensors.ipynb").write_bytes(SOURCE.read_bytes())
    (root / "nbgrader_config.py").write_text(
        (Path(__file__).parents[1] / "nbgrader_config.py").read_text()
        + "\nc.ImportLimits.max_entries = 5\nc.ImportLimits.max_total_mb = 1\n")
    return root


def make_zip(path: Path, entries) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def test_a_download_is_bounded_in_entries_and_size_and_the_rest_still_comes_in(course, tmp_path):
    entries = [(f"gpu_tensors_s{i}_attempt_2024-03-0{i + 1}_gpu_tensors.ipynb", NB) for i in range(3)]
    entries.append(("gpu_tensors_big_attempt_2024-03-01_gpu_tensors.ipynb", b"0" * 2_000_000))
    entries += [(f"gpu_tensors_late{i}_attempt_2024-03-01_gpu_tensors.ipynb", NB) for i in range(3)]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    imported = sorted(p.name for p in (course / "submitted").iterdir())
    assert imported == ["late0", "s0", "s1", "s2"]  # five entries read, one of them too large
    said = {student: message for student, _, message in problems}
    assert "too large" in said["big"]
    assert "more than 5 entries" in said["late1"] and "more than 5 entries" in said["late2"]
    stamp = (course / "submitted" / "s1" / "gpu_tensors" / "timestamp.txt").read_text()
    assert stamp.startswith("2024-03-02 00:00:00")


def test_a_file_that_is_not_a_zip_is_refused_with_a_reason(course, tmp_path):
    bad = tmp_path / "download.zip"
    bad.write_text("not a zip")
    with pytest.raises(importers.ImportFailed, match="not a zip file"):
        importers.import_zip(course, "gpu_tensors", bad)


def test_student_ids_are_plain_identifiers():
    good = ["ada", "bo.x", "c-3", "d_4", "A1"]
    bad = ["..", ".", ".hidden", "a/b", "", "x" * 65, "a..b", "ä", "a b", "-x"]
    assert all(inbox.valid_student_id(s) for s in good)
    assert not any(inbox.valid_student_id(s) for s in bad)


def test_a_folder_entry_that_is_a_link_or_a_fifo_is_refused(course, tmp_path):
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(NB)
    os.symlink(SOURCE, folder / "bo.ipynb")
    (folder / "cy").mkdir()
    os.mkfifo(folder / "cy" / "gpu_tensors.ipynb")
    problems = importers.import_folder(course, "gpu_tensors", folder)
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["ada"]
    text = " ".join(message for _, _, message in problems)
    assert "bo.ipynb' is a link" in text and "not a regular file" in text


def test_reading_never_follows_a_link_or_opens_a_fifo(tmp_path):
    (tmp_path / "real.txt").write_text("real")
    os.symlink(tmp_path / "real.txt", tmp_path / "link.txt")
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(safefiles.Unsafe, match="link"):
        safefiles.read_bytes(tmp_path / "link.txt", 100)
    with pytest.raises(safefiles.Unsafe, match="not a regular file"):
        safefiles.read_bytes(tmp_path / "pipe", 100)  # returns at once, never hangs
    with pytest.raises(safefiles.Unsafe, match="larger"):
        safefiles.read_bytes(tmp_path / "real.txt", 2)
    files, refused = safefiles.regular_files(tmp_path, 100, 100)
    assert files == {"real.txt": b"real"} and len(refused) == 2


@pytest.mark.parametrize("change, words", [
    (lambda nb: nb.cells[3].metadata.update(nbgrader="x"), "not a mapping"),
    (lambda nb: nb.cells[3].metadata["nbgrader"].update(schema_version=1), "another version"),
    (lambda nb: nb.cells[3].metadata["nbgrader"].update(grade="yes"), "'grade' must be"),
    (lambda nb: nb.cells[3].metadata["nbgrader"].update(points=-1), "'points' must be"),
    (lambda nb: nb.cells[3].metadata["nbgrader"].update(grade_id="bonus"), "'bonus'"),
    (lambda nb: nb.cells[3].metadata["nbgrader"].pop("grade_id"), "without a name"),
    (lambda nb: nb.cells.__setitem__(3, nbformat.v4.new_markdown_cell(
        "x", metadata={"nbgrader": dict(nb.cells[3].metadata["nbgrader"])})), "was changed from"),
])
def test_metadata_nbgrader_would_choke_on_is_an_invalid_notebook(change, words):
    nb = make_submission(RELEASE, SOLUTIONS)
    assert nb.cells[3].metadata["nbgrader"]["grade_id"] == "checks"
    change(nb)
    cells = {"checks": {"cell_type": "code"}}
    files = {"gpu_tensors.ipynb": nbformat.writes(nb).encode()}
    fate, message = inbox.problem(files, [], ["gpu_tensors.ipynb"], cells)
    assert fate == "invalid notebook" and words in message


def test_an_honest_notebook_passes_the_inbox(course):
    files = {"gpu_tensors.ipynb": NB}
    cells = inbox.source_cells(course, "gpu_tensors")
    assert inbox.problem(files, [], ["gpu_tensors.ipynb"], cells) is None
    assert inbox.problem({}, [], ["gpu_tensors.ipynb"], cells)[0] == "no notebook"
    assert inbox.problem({"gpu_tensors.ipynb": b"{"}, [], ["gpu_tensors.ipynb"],
                         cells)[0] == "invalid notebook"
    assert inbox.problem(files, ["x is a link"], ["gpu_tensors.ipynb"], cells)[0] == \
        "invalid notebook"
