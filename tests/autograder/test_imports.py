"""Imports and the inbox, without grading: bounds, names, links and nbgrader metadata.

The attacks on imports that a student would try are cases of tests/hostile (graded with
the whole class in test_pipeline.py); here are the limits themselves.
"""

from __future__ import annotations

import logging
import os
import shutil
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.coordinator import importers, inbox
from autograder.sandbox import safefiles
from tests.submissions_gpu_tensors import RELEASE, SOLUTIONS, SOURCE, make_submission

NB = nbformat.writes(make_submission(RELEASE, SOLUTIONS)).encode()


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    (root / "source" / "gpu_tensors").mkdir(parents=True)
    (root / "source" / "gpu_tensors" / "gpu_tensors.ipynb").write_bytes(SOURCE.read_bytes())
    (root / "nbgrader_config.py").write_text(
        (Path(__file__).parents[2] / "nbgrader_config.py").read_text()
        + "\nc.ImportLimits.max_entries = 5\nc.ImportLimits.max_total_mb = 1\n"
    )
    return root


def make_zip(path: Path, entries) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def test_a_download_is_bounded_in_entries_and_size_and_the_rest_still_comes_in(course, tmp_path):
    entries = [
        (f"gpu_tensors_s{i}_attempt_2024-03-0{i + 1}_gpu_tensors.ipynb", NB) for i in range(3)
    ]
    entries.append(("gpu_tensors_big_attempt_2024-03-01_gpu_tensors.ipynb", b"0" * 2_000_000))
    entries += [(f"gpu_tensors_late{i}_attempt_2024-03-01_gpu_tensors.ipynb", NB) for i in range(3)]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    imported = sorted(p.name for p in (course / "submitted").iterdir())
    assert imported == ["late0", "late1", "s0", "s1", "s2"]  # five entries read; one too large
    said = {student: (fate, message) for student, fate, message in problems}
    assert said["big"] == ("needs review", said["big"][1]) and "not read" in said["big"][1]
    assert (
        said["late2"][0] == "needs review" and "larger than the import limits" in said["late2"][1]
    )
    stamp = (course / "submitted" / "s1" / "gpu_tensors" / "timestamp.txt").read_text()
    assert stamp.startswith("2024-03-02 00:00:00")


def test_an_lms_or_folder_entry_of_an_id_that_is_not_plain_is_that_students_review(
    course, tmp_path
):
    """An LMS download's e-mail id, or a folder import's dotted one, is not imported and
    is that student's "needs review" (no score in any export), never a silent "not
    submitted", 0 (outside review 71); a name that is no plain id for another reason (a
    path out of the download) stays no one's."""
    entries = [
        ("gpu_tensors_ada@uni.edu_attempt_2024-03-01_gpu_tensors.ipynb", NB),
        ("gpu_tensors_bo_attempt_2024-03-01_gpu_tensors.ipynb", NB),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["bo"]
    said = {student: (fate, message) for student, fate, message in problems}
    assert said["ada@uni.edu"][0] == "needs review"
    assert inbox.NOT_A_PLAIN_ID in said["ada@uni.edu"][1]
    inbox_folder = tmp_path / "inbox"
    inbox_folder.mkdir()
    (inbox_folder / "ada.lovelace@uni.edu.ipynb").write_bytes(NB)
    (inbox_folder / "ѕ001.ipynb").write_bytes(NB)  # a Cyrillic look-alike: no one's (attack 73)
    problems = importers.import_folder(course, "gpu_tensors", inbox_folder)
    assert sorted((s, f) for s, f, _ in problems) == [
        ("", "no notebook"),
        ("ada.lovelace@uni.edu", "needs review"),
    ]
    assert not (course / "submitted").exists() or [
        p.name for p in (course / "submitted").iterdir()
    ] == ["bo"]


def test_blackboards_attempt_records_are_skipped_without_a_warning(course, tmp_path):
    """Blackboard puts a ``<prefix>_<student>_attempt_<date>.txt`` beside each attempt's
    files: it is the LMS's, not a misnamed submission, and is neither imported nor warned
    about; a student's own .txt after the date is still theirs."""
    entries = [
        ("gpu_tensors_ada_attempt_2026-12-01-10-00-00.txt", b"Name: Ada\n"),
        ("gpu_tensors_ada_attempt_2026-12-01-10-00-00_gpu_tensors.ipynb", NB),
        ("gpu_tensors_ada_attempt_2026-12-01-10-00-00_notes.txt", b"mine"),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert problems == []
    folder = course / "submitted" / "ada" / "gpu_tensors"
    assert (folder / "notes.txt").read_bytes() == b"mine"
    assert sorted(p.name for p in folder.iterdir()) == [
        "gpu_tensors.ipynb",
        "notes.txt",
        "timestamp.txt",
    ]


def test_one_students_entries_cannot_use_up_the_others_budget(course, tmp_path):
    """A submission may hold nbgrader's max_dir_size; past it only that student's entries
    are refused, and an older copy of theirs is never graded in place of the refused one."""
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text()
        + "\nc.ImportLimits.max_total_mb = 100\n"
        + "c.ImportLimits.max_entries = 100\n"
        + "c.CourseDirectory.max_dir_size = 300\n"
    )
    old = course / "submitted" / "hog" / "gpu_tensors"
    old.mkdir(parents=True)
    (old / "gpu_tensors.ipynb").write_bytes(NB)
    junk = [
        (f"gpu_tensors_hog_attempt_2024-03-01_junk{i}.ipynb", os.urandom(100_000)) for i in range(5)
    ]
    entries = junk + [
        ("gpu_tensors_hog_attempt_2024-03-01_gpu_tensors.ipynb", NB),
        ("gpu_tensors_ann_attempt_2024-03-01_gpu_tensors.ipynb", NB),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert (course / "submitted" / "ann" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == NB
    assert not (course / "submitted" / "hog").joinpath("gpu_tensors").exists()
    assert {s for s, _, _ in problems} == {"hog"}


def test_one_students_many_files_are_theirs_alone_to_exceed(course, tmp_path):
    """A student whose upload names more files than a submission may hold
    (c.SubmissionLimits.max_files) is refused before anything of theirs is read, and
    their entries count against no limit of the download: every classmate is imported
    (attack 38: 20,000 empty files of one student left each classmate after them in the
    download ungraded)."""
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.SubmissionLimits.max_files = 3\n"
    )
    flood = [(f"gpu_tensors_aaa_attempt_2024-03-01_n{i}.txt", b"") for i in range(50)]
    entries = [("gpu_tensors_aaa_attempt_2024-03-01_gpu_tensors.ipynb", NB), *flood]
    entries += [(f"gpu_tensors_s{i}_attempt_2024-03-01_gpu_tensors.ipynb", NB) for i in range(5)]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    imported = sorted(p.name for p in (course / "submitted").iterdir())
    assert imported == ["s0", "s1", "s2", "s3", "s4"]
    assert [(s, f) for s, f, _ in problems] == [("aaa", "invalid notebook")]
    assert "more than 3 files" in problems[0][2]


def test_only_a_files_latest_attempt_is_read_and_counted(course, tmp_path):
    """One file in many attempts names one file, and only its latest attempt is read: the
    attempts count against no limit of the download (outside attack 39: one empty file in
    20,001 attempts left each classmate after it ungraded)."""
    attempts = [
        (f"gpu_tensors_hog_attempt_2024-03-01-10-00-{i:02d}_notes.txt", f"v{i}".encode())
        for i in range(20)
    ]
    entries = [*attempts, ("gpu_tensors_hog_attempt_2024-03-01-10-00-19_gpu_tensors.ipynb", NB)]
    entries += [(f"gpu_tensors_s{i}_attempt_2024-03-01_gpu_tensors.ipynb", NB) for i in range(3)]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert problems == []
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["hog", "s0", "s1", "s2"]
    assert (course / "submitted" / "hog" / "gpu_tensors" / "notes.txt").read_bytes() == b"v19"


def test_entries_that_tie_a_files_latest_attempt_are_said_unread(course, tmp_path):
    """Many entries of one name and date (a tie: left for the instructor) are not read,
    nor counted against the download's entries (outside attack 40: 20,001 of them left
    each classmate after them unread)."""
    tie = ("gpu_tensors_tie_attempt_2024-03-01_gpu_tensors.ipynb", NB)
    entries = [tie] * 20
    entries += [(f"gpu_tensors_s{i}_attempt_2024-03-01_gpu_tensors.ipynb", NB) for i in range(3)]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["s0", "s1", "s2"]
    assert [(s, f) for s, f, _ in problems] == [("tie", "needs review")]


def test_the_most_files_a_submission_may_hold_are_graded_beside_nbgraders_own(course, tmp_path):
    """An import of exactly c.SubmissionLimits.max_files files gets its timestamp.txt, which
    is nbgrader's, not the student's: it is still read for grading (outside attack 39: the
    right notebook scored nothing, an invalid notebook of one name too many)."""
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.SubmissionLimits.max_files = 3\n"
    )
    stamp = "gpu_tensors_full_attempt_2024-03-01"
    entries = [(f"{stamp}_gpu_tensors.ipynb", NB), (f"{stamp}_a.txt", b""), (f"{stamp}_b.txt", b"")]
    assert importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries)) == []
    folder = course / "submitted" / "full" / "gpu_tensors"
    assert (folder / "timestamp.txt").exists()
    files, refused = inbox.read_submission(folder, importers.load_course_config(course))
    assert refused == [] and len(files) == 4


def test_a_submission_of_more_names_than_a_submission_may_hold_is_refused_unread(tmp_path):
    """Files, folders and the rest count; past the count nothing more is read."""
    folder = tmp_path / "sub"
    (folder / "data").mkdir(parents=True)
    for i in range(3):
        (folder / "data" / f"{i}.txt").write_text("x")
    (folder / "gpu_tensors.ipynb").write_bytes(NB)
    files, refused = safefiles.regular_files(folder, 10**6, 10**7, limit_count=5)
    assert sorted(files) == ["data/0.txt", "data/1.txt", "data/2.txt", "gpu_tensors.ipynb"]
    assert refused == []
    files, refused = safefiles.regular_files(folder, 10**6, 10**7, limit_count=4)
    assert refused == ["more than 4 files and folders (c.SubmissionLimits.max_files)"]
    assert len(files) == 3


def test_a_folder_of_more_names_than_the_count_is_refused_without_being_listed_whole(
    tmp_path, monkeypatch
):
    """A folder of very many names is listed only as far as the count allows (it was
    listed whole and sorted first); nbgrader's own files count against nothing."""
    folder = tmp_path / "sub"
    (folder / "many").mkdir(parents=True)
    for i in range(200):
        (folder / "many" / f"{i:03}.txt").write_text("x")
    (folder / "timestamp.txt").write_text("2026-12-05 10:00:00")
    listed = []
    scandir = os.scandir

    class Counting:
        def __init__(self, fd):
            self.inner = scandir(fd)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

        def __iter__(self):
            for entry in self.inner:
                listed.append(entry.name)
                yield entry

    monkeypatch.setattr(safefiles.os, "scandir", Counting)
    files, refused = safefiles.regular_files(
        folder, 10**6, 10**7, limit_count=10, uncounted=("timestamp.txt",)
    )
    assert refused == ["more than 10 files and folders (c.SubmissionLimits.max_files)"]
    assert files == {} and len(listed) == 2 + 10  # the top folder's two, then ten of many/
    listed.clear()
    files, refused = safefiles.regular_files(
        folder, 10**6, 10**7, limit_count=201, uncounted=("timestamp.txt",)
    )
    assert refused == [] and len(files) == 201 and len(listed) == 202


def test_a_file_that_is_not_a_zip_is_refused_with_a_reason(course, tmp_path):
    bad = tmp_path / "download.zip"
    bad.write_text("not a zip")
    with pytest.raises(importers.ImportFailed, match="not a zip file"):
        importers.import_zip(course, "gpu_tensors", bad)


def test_student_ids_are_plain_identifiers():
    good = ["ada", "bo.x", "c-3", "d_4", "A1"]
    bad = ["..", ".", ".hidden", "a/b", "", "x" * 65, "a..b", "ä", "a b", "-x", "ada\n"]
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


# A name made of a terminal's control sequences: set the window title, put a command on
# the clipboard (OSC 52), erase the line, start a forged one, hide the rest (attack 22).
FORGING_NAME = (
    "x\x1b]0;all graded\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2K\r"
    "\ncourse-grade: vic: not collected\x1b[8m\u202e"
)


def test_a_name_the_student_chose_reaches_no_terminal_or_report_as_control_characters(
    course, tmp_path, capsys
):
    """A submission folder holding a FIFO and a link whose names are control sequences: the
    refusal names them with escapes, in the import's messages, on the terminal, in the
    summary table and in report.csv, and replays nothing on a later run."""
    from autograder.coordinator import cli, report

    folder = tmp_path / "inbox" / "ada"
    folder.mkdir(parents=True)
    (folder / "gpu_tensors.ipynb").write_bytes(NB)
    os.mkfifo(folder / FORGING_NAME)
    os.symlink("/etc/hostname", folder / (FORGING_NAME + "2"))
    problems = importers.import_folder(course, "gpu_tensors", tmp_path / "inbox")
    messages = [message for _, _, message in problems]
    assert messages and all(m.isprintable() for m in messages), messages
    assert any("\\x1b]52;c;" in m and "\\n" in m for m in messages)  # named, escaped
    cli_args = cli.parse_args(
        ["gpu_tensors", "--course", str(course), "--folder", str(folder.parent)]
    )
    cli.run_import(cli_args, course, "gpu_tensors")
    printed = capsys.readouterr().err
    assert printed and "\x1b" not in printed and "\x07" not in printed and "\r" not in printed
    # A ledger written before the escape: the table and report.csv still show none.
    outcome = {"student_id": "ada", "fate": "invalid notebook", "details": [FORGING_NAME]}
    table = report.summary_table([outcome])
    assert all(line.isprintable() for line in table.splitlines())
    _, csv_path = report.write_report([outcome], tmp_path / "reports")
    assert "\x1b" not in csv_path.read_text() and "\x07" not in csv_path.read_text()


def test_a_students_many_problems_are_counted_not_listed_and_their_fate_kept():
    """Attack 22 (a14): 20,000 undatable exchange folders of one student, each a problem and
    a note, took every collect three minutes, growing with their square."""
    many = [("mal", importers.NOTE, f"exchange entry {i}: not dated") for i in range(20_000)]
    many.append(("mal", importers.NEEDS_REVIEW, "the last entry: left for review"))
    others = [("", importers.NO_NOTEBOOK, "not a plain student id")] * 3 + [
        ("ada", importers.NEEDS_REVIEW, "late")
    ]
    kept = importers.summarized(many + others)
    mine = [p for p in kept if p[0] == "mal"]
    assert len(mine) == importers.MAX_PROBLEMS_LISTED + 2
    assert mine[-2] == many[-1]  # the fate past the list is kept
    assert "20001 problems with mal's entries in all" in mine[-1][2]
    assert [p for p in kept if p[0] != "mal"] == others


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


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda nb: nb.cells[3].metadata.update(nbgrader="x"), "not a mapping"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].update(schema_version=1), "Outdated schema"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].update(grade="yes"), "not of type 'boolean'"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].update(points=-1), "less than the minimum"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].update(grade_id="bonus"), "'bonus'"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].pop("grade_id"), "does not have a grade_id"),
        (lambda nb: nb.cells[3].metadata.update(nbgrader={}), "nbgrader refuses"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].update(extra=1), "'extra' was unexpected"),
        (lambda nb: nb.cells[3].metadata["nbgrader"].update(grade=True, points=5), "role changed"),
        (
            lambda nb: nb.cells.__setitem__(
                3,
                nbformat.v4.new_markdown_cell(
                    "x", metadata={"nbgrader": dict(nb.cells[3].metadata["nbgrader"])}
                ),
            ),
            "was changed from",
        ),
    ],
)
def test_metadata_nbgrader_would_choke_on_is_an_invalid_notebook(change, words):
    nb = make_submission(RELEASE, SOLUTIONS)
    assert nb.cells[3].metadata["nbgrader"]["grade_id"] == "checks"
    change(nb)
    cells = {"checks": {"cell_type": "code", "locked": True}}
    files = {"gpu_tensors.ipynb": nbformat.writes(nb).encode()}
    fate, message = inbox.problem(files, [], ["gpu_tensors.ipynb"], cells)
    assert fate == "invalid notebook" and words in message


def test_copies_of_a_cell_are_graded_as_ordinary_cells():
    """A learner who copies a cell in JupyterLab copies its nbgrader metadata: the first
    keeps it, the copies lose it (nbgrader would fail on them), and the outcome says so."""
    nb = make_submission(RELEASE, SOLUTIONS)
    nb.cells.insert(5, nbformat.from_dict(nb.cells[3]))
    files = {"gpu_tensors.ipynb": nbformat.writes(nb).encode()}
    cleaned, notes = inbox.ordinary_cells(files, ["gpu_tensors.ipynb"])
    ids = [
        c.metadata.get("nbgrader", {}).get("grade_id")
        for c in nbformat.reads(cleaned["gpu_tensors.ipynb"].decode(), as_version=4).cells
    ]
    assert ids.count("checks") == 1 and ids.index("checks") == 3
    assert notes == [
        "gpu_tensors.ipynb: copies of cell(s) checks graded as ordinary cells "
        "(only the first counts)"
    ]


def test_a_cell_named_with_no_role_is_graded_as_an_ordinary_cell():
    """nbgrader's autograde drops a name that is not the assignment's, then fails looking
    for it (the grader's own error, on every run): such a cell, or one with nbgrader
    metadata and no name, loses that metadata; the assignment's own cells keep theirs."""
    nb = make_submission(RELEASE, SOLUTIONS)
    roleless = {"grade": False, "solution": False, "locked": False, "schema_version": 3}
    named = nbformat.v4.new_code_cell("notes = 1")
    named.metadata["nbgrader"] = {"grade_id": "my_notes", **roleless}
    nameless = nbformat.v4.new_code_cell("notes = 2")
    nameless.metadata["nbgrader"] = dict(roleless)
    # (attack 17) a name with a newline at its end, quoted in the reports as a line of its own
    staff = nbformat.v4.new_code_cell("notes = 3")
    staff.metadata["nbgrader"] = {"grade_id": "COURSE-STAFF_flag\n", **roleless}
    nb.cells += [named, nameless, staff]
    files = {"gpu_tensors.ipynb": nbformat.writes(nb).encode()}
    source = {"checks": {"cell_type": "code", "locked": True}}
    cleaned, notes = inbox.ordinary_cells(files, ["gpu_tensors.ipynb"], source)
    cells = nbformat.reads(cleaned["gpu_tensors.ipynb"].decode(), as_version=4).cells
    assert not any("nbgrader" in cell.metadata for cell in cells[-3:])
    assert cells[3].metadata["nbgrader"]["grade_id"] == "checks"
    assert notes == [
        f"gpu_tensors.ipynb: cell(s) my_notes, cell {len(cells) - 1}, cell {len(cells)} graded "
        "as ordinary cells "
        "(nbgrader metadata that names no cell of the assignment and gives no role)"
    ]


def _without(nb, *grade_ids):
    nb.cells = [
        c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in grade_ids
    ]
    return nb


@pytest.mark.parametrize(
    "change, words",
    [
        # A cell that names a test of the assignment with every role taken off, placed first.
        (
            lambda nb: nb.cells.insert(
                1,
                nbformat.v4.new_markdown_cell(
                    "x",
                    metadata={
                        "nbgrader": {
                            "grade_id": "test_q2_mb",
                            "grade": False,
                            "solution": False,
                            "locked": False,
                            "task": False,
                            "schema_version": 3,
                        }
                    },
                ),
            ),
            "('test_q2_mb') was changed from a code cell",
        ),
        # An answer deleted with its test: nbgrader cannot put the test back.
        (
            lambda nb: _without(nb, "q1_prepare_batch", "test_q1_shape"),
            "'test_q1_shape' was deleted",
        ),
    ],
)
def test_a_notebook_nbgrader_could_not_put_together_is_an_invalid_notebook(course, change, words):
    """Each of these once crashed nbgrader's OverwriteCells: the fate was the grader's own
    `error`, for a notebook an honest learner could have made."""
    nb = make_submission(RELEASE, SOLUTIONS)
    change(nb)
    files = {"gpu_tensors.ipynb": nbformat.writes(nb).encode()}
    cells = inbox.source_cells(course, "gpu_tensors")
    fate, message = inbox.problem(files, [], ["gpu_tensors.ipynb"], cells)
    assert fate == "invalid notebook" and words in message, message


@pytest.mark.parametrize("levels, refused", [(40, False), (150, True), (480, True), (5000, True)])
def test_a_notebook_nested_past_what_the_grader_reads_is_an_invalid_notebook(
    course, levels, refused
):
    """nbgrader's own steps recurse through a notebook: an outside attack's metadata nested
    about 490 deep came back as the grader's own error on every run. A plot's or a widget's
    state nests a few levels; past ``inbox.MAX_DEPTH`` the notebook is refused, saying so
    (5000 deep: past what the JSON parser itself reads)."""
    nb = make_submission(RELEASE, SOLUTIONS)
    nb.cells[0].metadata["deep"] = "@DEEP@"
    raw = nbformat.writes(nb).replace('"@DEEP@"', "[" * levels + "1" + "]" * levels)
    files = {"gpu_tensors.ipynb": raw.encode()}
    found = inbox.problem(
        files, [], ["gpu_tensors.ipynb"], inbox.source_cells(course, "gpu_tensors")
    )
    if not refused:
        assert found is None, found
        return
    fate, message = found
    assert fate == "invalid notebook", message
    if levels < 1000:
        assert f"nests more than {inbox.MAX_DEPTH} levels deep" in message, message


def _as_nbformat_3(nb, deep_json: int = 0, more_cells: int = 0) -> bytes:
    """``nb`` saved as nbformat 3 (its cells under worksheets), with a display output whose
    "json", a string in nbformat 3, nests ``deep_json`` lists, and ``more_cells`` empty
    cells more."""
    import json

    from nbformat.v4 import downgrade

    if deep_json:
        plain = next(c for c in nb.cells if c.cell_type == "code" and "nbgrader" not in c.metadata)
        plain.outputs = [nbformat.v4.new_output("display_data", data={"application/json": {}})]
    doc = json.loads(nbformat.writes(downgrade(nb), version=3))
    cells = doc["worksheets"][0]["cells"]
    for cell in cells:
        for out in cell.get("outputs", []):
            if "json" in out:
                out["json"] = "[" * deep_json + "]" * deep_json
    cells.extend({"cell_type": "markdown", "metadata": {}, "source": ""} for _ in range(more_cells))
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "shape, words",
    [
        ({}, None),
        ({"deep_json": 600}, "nests more than 100 levels deep"),
        ({"more_cells": 2_500}, "the grader reads at most 2,000"),
    ],
)
def test_an_nbformat_3_notebook_is_held_to_the_limits_of_the_notebook_it_becomes(
    course, shape, words
):
    """nbformat 3 keeps its cells under worksheets and a "json" output as a string, which
    nbformat parses as it converts the notebook: an outside attack's 600-deep string
    passed the nesting check and then stopped every run of the class (nbformat could not
    write the converted notebook), and 85,000 cells under a worksheet passed the cell
    count."""
    raw = _as_nbformat_3(make_submission(RELEASE, SOLUTIONS), **shape)
    found = inbox.problem(
        {"gpu_tensors.ipynb": raw},
        [],
        ["gpu_tensors.ipynb"],
        inbox.source_cells(course, "gpu_tensors"),
    )
    if words is None:
        assert found is None, found  # a plain nbformat 3 notebook is graded
    else:
        assert found is not None and found[0] == "invalid notebook" and words in found[1], found


def test_a_deleted_test_alone_is_left_to_nbgrader_which_puts_it_back(course):
    nb = _without(make_submission(RELEASE, SOLUTIONS), "test_q2_mb")
    files = {"gpu_tensors.ipynb": nbformat.writes(nb).encode()}
    cells = inbox.source_cells(course, "gpu_tensors")
    assert inbox.problem(files, [], ["gpu_tensors.ipynb"], cells) is None


@pytest.mark.parametrize(
    "stamp, ok",
    [
        ("2024-03-01 10:00:00.000000 UTC", True),
        ("2024-03-01 10:00:00", True),
        ("2024-03-01T10:00:00Z", True),  # ISO 8601, as nbgrader reads it too
        ("2024-03-01 10:00:00+01:00", True),
        ("2024-03-01 10:00:00 +0100", False),  # nbgrader reads that as 100 seconds
        ("2024-03-01 10:00:00 /etc/shadow", False),
        ("2024-03-01 10:00:00 Europe/Paris", False),
        # The pattern's shape, but no date nbgrader's parser reads (it raised: an outside
        # attack's rejected resubmission with such a date ended every run).
        ("2026-02-30 10:00:00", False),
        ("2026-13-45 25:61:61", False),
        ("0000-01-01 00:00:00", False),
        ("2026-01-01 10:00:00+99:99", False),
        ("not a date", False),
        ("", False),
    ],
)
def test_a_timestamp_must_be_a_date_and_nothing_else(stamp, ok):
    """nbgrader hands a timestamp's last word to a time-zone lookup, which opens any path,
    and raises on a date it cannot read."""
    problem = inbox.timestamp_problem({"timestamp.txt": stamp.encode()})
    assert (problem is None) == ok


@pytest.mark.parametrize(
    "stamp, zone, utc",
    [
        # nbgrader's exchange, c.Exchange.timezone = "America/New_York": EST, and EDT in summer
        ("2026-12-07 07:55:05.865602 EST", "America/New_York", "2026-12-07 12:55:05.865602 UTC"),
        ("2026-07-07 07:55:05.865602 EDT", "America/New_York", "2026-07-07 11:55:05.865602 UTC"),
        ("2026-07-07 07:55:05 CEST", "Europe/Berlin", "2026-07-07 05:55:05.000000 UTC"),
        # the hour that comes twice: its abbreviation says which
        ("2026-11-01 01:30:00 EDT", "America/New_York", "2026-11-01 05:30:00.000000 UTC"),
        ("2026-11-01 01:30:00 EST", "America/New_York", "2026-11-01 06:30:00.000000 UTC"),
        # not the course zone's name for that moment, or no named zone: left to the checks
        ("2026-07-07 07:55:05 EST", "America/New_York", None),
        ("2026-07-07 07:55:05 PST", "America/New_York", None),
        ("2026-07-07 07:55:05 EDT", "UTC", None),
        ("2026-07-07 07:55:05 EDT", "../../../etc/shadow", None),
        ("2026-07-07 07:55:05 UTC", "America/New_York", None),
        ("2026-02-30 07:55:05 EST", "America/New_York", None),
        # past UTC's last year: left to the checks, never the run's end (attack 72)
        ("9999-12-31 23:59:59 EST", "America/New_York", None),
        ("0001-01-01 00:00:00 LMT", "America/New_York", "0001-01-01 04:56:02.000000 UTC"),
    ],
)
def test_a_date_in_the_courses_named_zone_is_read_in_utc(stamp, zone, utc):
    """nbgrader writes its exchange's dates in c.Exchange.timezone ("... EDT"), which its
    own parser reads as UTC where no zone file has the abbreviation's name (EDT, CEST):
    hours off. The grader read none of them, and the submission lost its grade (outside
    review 71). Now the course's zone says what the abbreviation means at that moment."""
    said = inbox.utc_stamp(stamp, zone)
    assert said == (utc or stamp)
    assert (inbox.timestamp_problem({"timestamp.txt": said.encode()}) is None) == (
        utc is not None or stamp.endswith("UTC")
    )


def test_an_honest_notebook_passes_the_inbox(course):
    files = {"gpu_tensors.ipynb": NB}
    cells = inbox.source_cells(course, "gpu_tensors")
    assert inbox.problem(files, [], ["gpu_tensors.ipynb"], cells) is None
    assert inbox.problem({}, [], ["gpu_tensors.ipynb"], cells)[0] == "no notebook"
    assert (
        inbox.problem({"gpu_tensors.ipynb": b"{"}, [], ["gpu_tensors.ipynb"], cells)[0]
        == "invalid notebook"
    )
    assert (
        inbox.problem(files, ["x is a link"], ["gpu_tensors.ipynb"], cells)[0] == "invalid notebook"
    )
    # A fine notebook whose date cannot be read is left for review, not called invalid.
    dated = {**files, "timestamp.txt": b"2026-12-03 05:00:00 +0100"}
    fate, why = inbox.problem(dated, [], ["gpu_tensors.ipynb"], cells)
    assert fate == "needs review" and "give it a date" in why


def _exchange_inbound(course: Path, tmp_path: Path) -> Path:
    """An exchange for the course, the unit released into its gradebook: its inbound."""
    from tests.class_fixture import copy_generated

    exchange = tmp_path / "exchange"
    inbound = exchange / "pytorch-tensors-on-the-gpu" / "inbound"
    inbound.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + f"\nc.Exchange.root = {str(exchange)!r}\n"
    )
    shutil.rmtree(course / "source")  # the same notebook, as generated
    copy_generated(course)
    return inbound


def test_the_exchange_takes_only_plain_dated_folders_of_their_owner(course, tmp_path):
    """Whose an entry is comes first: a folder, a file or a link named for another student,
    or a date that only looks like one (an outside attack crashed the whole collect with
    "2026-13-45 99:99:99"), is only ever its maker's note: the student it names gets no
    fate and no gradebook row, whatever the case of the name. The collect goes on."""
    inbound = _exchange_inbound(course, tmp_path)
    stamp = "2024-03-01 10:00:00.000000 UTC"
    me = __import__("pwd").getpwuid(os.geteuid()).pw_name
    for name in (
        f"{me}+gpu_tensors+{stamp}+a",
        f"alice+gpu_tensors+{stamp}+b",
        "carol+gpu_tensors+2026-13-45 99:99:99+c",
    ):
        (inbound / name).mkdir()
        (inbound / name / "gpu_tensors.ipynb").write_bytes(NB)
        (inbound / name / "timestamp.txt").write_text("2099-01-01 00:00:00 /etc/shadow")
    (inbound / f"bob+gpu_tensors+{stamp}+d").write_text("a file, not a folder")
    (inbound / f"{me.upper()}X+gpu_tensors+{stamp}+e").symlink_to(
        inbound / f"{me}+gpu_tensors+{stamp}+a"
    )
    problems = importers.import_exchange(course, "gpu_tensors")
    assert sorted(p.name for p in (course / "submitted").iterdir()) == [me]
    # Each is recorded against the entry's owner, as a note, never as the named one's fate.
    assert {student for student, _, _ in problems} == {me}
    assert {fate for _, fate, _ in problems} == {"note"}
    said = " ".join(message for _, _, message in problems)
    for named in ("alice", "bob", "carol", f"{me.upper()}X"):
        assert f"{me} submitted it under {named}'s name" in said
    # The timestamp is the folder's own date, never the student's timestamp.txt.
    taken = (course / "submitted" / me / "gpu_tensors" / "timestamp.txt").read_text()
    assert taken == stamp


def test_an_exchange_in_a_named_zone_is_collected_with_its_date_in_utc(course, tmp_path):
    """A course whose exchange writes dates in New York time (c.Exchange.timezone): an
    attempt dated in summer time is collected, its timestamp.txt the same moment in UTC."""
    inbound = _exchange_inbound(course, tmp_path)
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + '\nc.Exchange.timezone = "America/New_York"\n'
    )
    me = __import__("pwd").getpwuid(os.geteuid()).pw_name
    entry = inbound / f"{me}+gpu_tensors+2024-07-01 10:00:00.000000 EDT+a"
    entry.mkdir()
    (entry / "gpu_tensors.ipynb").write_bytes(NB)
    problems = importers.import_exchange(course, "gpu_tensors")
    assert not [p for p in problems if p[1] != "note"], problems
    taken = (course / "submitted" / me / "gpu_tensors" / "timestamp.txt").read_text()
    assert taken == "2024-07-01 14:00:00.000000 UTC"


def test_without_the_owner_check_a_bad_entry_is_its_students_problem_and_passes_the_case_check(
    course, tmp_path
):
    """On a hub where every student is one system user (check_owner off), the name is the
    only id: a file, or a date that only looks like one, is that student's entry to review;
    the collect goes on; and an id that clashes in case with one taken is refused, never
    given a fate (it would shut the real student out of every later import)."""
    inbound = _exchange_inbound(course, tmp_path)
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.ExchangeCollect.check_owner = False\n"
    )
    stamp = "2024-03-01 10:00:00.000000 UTC"
    vic1 = course / "submitted" / "vic1" / "gpu_tensors"
    vic1.mkdir(parents=True)
    (vic1 / "gpu_tensors.ipynb").write_bytes(NB)
    for name in (f"dee+gpu_tensors+{stamp}+a", "carol+gpu_tensors+2026-13-45 99:99:99+c"):
        (inbound / name).mkdir()
        (inbound / name / "gpu_tensors.ipynb").write_bytes(NB)
    (inbound / f"bob+gpu_tensors+{stamp}+d").write_text("a file, not a folder")
    (inbound / f"VIC1+gpu_tensors+{stamp}+e").write_text("a case twin")
    problems = importers.import_exchange(course, "gpu_tensors")
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["dee", "vic1"]
    assert (vic1 / "gpu_tensors.ipynb").read_bytes() == NB
    fates = {student: (fate, message) for student, fate, message in problems if student}
    assert fates["bob"][0] == "needs review" and "not a folder" in fates["bob"][1]
    assert fates["carol"][0] == "needs review" and "does not read as" in fates["carol"][1]
    assert "VIC1" not in fates and "vic1" not in fates
    said = [m for s, _, m in problems if not s]
    assert any(m.startswith("'VIC1' and 'vic1' (already in the course)") for m in said)


def test_an_exchange_entry_of_an_id_that_is_not_plain_is_its_students_review_not_a_0(
    course, tmp_path
):
    """On a hub where every student is one system user (check_owner off), an e-mail id's
    entry is not collected, and is that student's "needs review" (no score in any export),
    never the silent "not submitted", 0 of a student on the roster (outside review 71). A
    name no ledger file could hold, or with control characters, stays no one's."""
    inbound = _exchange_inbound(course, tmp_path)
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.ExchangeCollect.check_owner = False\n"
    )
    stamp = "2024-03-01 10:00:00.000000 UTC"
    # (attack 72: a name a spreadsheet reads as a formula, and one that is a classmate's
    # id with a space after it, would have been written into grades.csv as ids)
    for student in ("ada@uni.edu", "x" * 201, "esc\x1bape", "=cmd|' -c calc'!A0", "s001 "):
        (inbound / f"{student}+gpu_tensors+{stamp}+a").mkdir()
        (inbound / f"{student}+gpu_tensors+{stamp}+a" / "gpu_tensors.ipynb").write_bytes(NB)
    problems = importers.import_exchange(course, "gpu_tensors")
    assert not (course / "submitted").exists() or not list((course / "submitted").iterdir())
    fates = {student: (fate, message) for student, fate, message in problems if student}
    assert list(fates) == ["ada@uni.edu"]
    assert fates["ada@uni.edu"][0] == "needs review"
    assert inbox.NOT_A_PLAIN_ID in fates["ada@uni.edu"][1]
    assert sum(1 for s, _, m in problems if not s and "not a plain student id" in m) == 4


def test_an_undated_folder_submission_is_kept_over_an_exchange_attempt(course, tmp_path):
    """The README: a submission put in submitted/ with --folder (undated) is the
    instructor's choice, and an import keeps it. nbgrader's collect removed it before the
    grader's copy could keep it (an outside attack: an accepted 30/30 became 0/30)."""
    inbound = _exchange_inbound(course, tmp_path)
    me = __import__("pwd").getpwuid(os.geteuid()).pw_name
    kept = course / "submitted" / me / "gpu_tensors"
    kept.mkdir(parents=True)
    (kept / "gpu_tensors.ipynb").write_bytes(NB)
    attempt = inbound / f"{me}+gpu_tensors+2024-03-01 10:00:00.000000 UTC+a"
    attempt.mkdir()
    (attempt / "gpu_tensors.ipynb").write_bytes(BLANK)
    importers.import_exchange(course, "gpu_tensors")
    assert (kept / "gpu_tensors.ipynb").read_bytes() == NB
    assert not (kept / "timestamp.txt").exists()


def test_a_file_rewritten_while_the_collect_reads_it_is_dated_by_that_change(
    course, tmp_path, monkeypatch
):
    """The date is checked again after the files are read: a notebook swapped for late work
    between the first check and the copy (an outside attack, with a watcher in the
    student's folder) is left for review, never taken with the on-time name."""
    import datetime

    from autograder.sandbox import safefiles

    monkeypatch.setattr(importers, "BACKDATE_SLACK", datetime.timedelta(0))
    folder, _, me = _on_time_attempt(course, tmp_path, {"gpu_tensors.ipynb": BLANK})
    read = safefiles.regular_files

    def swapped_while_read(path, *limits, **kw):
        with open(folder / "gpu_tensors.ipynb", "r+b") as f:  # after the first check
            f.write(NB)
        return read(path, *limits, **kw)

    monkeypatch.setattr(safefiles, "regular_files", swapped_while_read)
    [(student, fate, message)] = importers.import_exchange(course, "gpu_tensors")
    assert (student, fate) == (me, "needs review")
    assert "was made or last changed at" in message
    assert not (course / "submitted" / me).exists()


def test_an_exchange_the_instructor_cannot_read_is_said_in_one_line(course, tmp_path, monkeypatch):
    """--collect without sudo: the students' folders are theirs. One clear line (the CLI's
    exit status 2), never a traceback, and nothing in the course changed."""
    inbound = _exchange_inbound(course, tmp_path)
    scandir = os.scandir

    def refused(path="."):
        if os.fspath(path) == str(inbound):
            raise PermissionError(13, "Permission denied", str(inbound))
        return scandir(path)

    monkeypatch.setattr(importers.os, "scandir", refused)
    with pytest.raises(importers.ImportFailed, match="collect as root"):
        importers.import_exchange(course, "gpu_tensors")
    assert not (course / "submitted").exists() or not any((course / "submitted").iterdir())


def test_a_late_folder_named_with_an_early_date_is_left_for_review(course, tmp_path):
    """A student names their exchange folder, but cannot date it: one made after the due
    date under a name dated before it is not collected (it escaped the late penalty, 30/30
    against 0/30); an honest late one is taken with its date, and the penalty follows."""
    import datetime

    from nbgrader.api import Gradebook

    inbound = _exchange_inbound(course, tmp_path)
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.update_or_create_assignment("gpu_tensors", duedate=now - datetime.timedelta(hours=1))
    me = __import__("pwd").getpwuid(os.geteuid()).pw_name
    early = (now - datetime.timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    honest = now.strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    for name in (f"{me}+gpu_tensors+{early}+a",):
        (inbound / name).mkdir()
        (inbound / name / "gpu_tensors.ipynb").write_bytes(NB)
    problems = importers.import_exchange(course, "gpu_tensors")
    assert not (course / "submitted" / me).exists()
    [(student, fate, message)] = problems
    assert (student, fate) == (me, "needs review")
    assert "after the due date: the name cannot be its date" in message
    (inbound / f"{me}+gpu_tensors+{honest}+b").mkdir()
    (inbound / f"{me}+gpu_tensors+{honest}+b" / "gpu_tensors.ipynb").write_bytes(NB)
    importers.import_exchange(course, "gpu_tensors")
    taken = (course / "submitted" / me / "gpu_tensors" / "timestamp.txt").read_text()
    assert taken == honest


def test_a_backdated_entry_beside_an_attempt_that_is_taken_is_said_not_made_a_fate(
    course, tmp_path, monkeypatch
):
    """A student with an on-time attempt, and a later folder named with an earlier date:
    they are graded on the on-time attempt, and the refused folder is a note in every
    report. As a fate (`needs review`) it replaced their grade, and every later collect
    graded them again (a fresh instructor's run)."""
    import datetime

    from autograder.coordinator.ledger import Ledger

    monkeypatch.setattr(importers, "BACKDATE_SLACK", datetime.timedelta(0))
    folder, on_time, me = _on_time_attempt(course, tmp_path, {"gpu_tensors.ipynb": NB})
    early = on_time - datetime.timedelta(seconds=1)
    late = folder.parent / f"{me}+gpu_tensors+{early:%Y-%m-%d %H:%M:%S.%f UTC}+b"
    late.mkdir()
    (late / "gpu_tensors.ipynb").write_bytes(BLANK)
    problems = importers.import_exchange(course, "gpu_tensors")
    [(student, fate, message)] = problems
    assert (student, fate) == (me, importers.NOTE)
    assert "the name cannot be its date" in message and "graded on another attempt" in message
    taken = course / "submitted" / me / "gpu_tensors"
    assert (taken / "gpu_tensors.ipynb").read_bytes() == NB
    importers.record_problems(course, "gpu_tensors", problems)
    ledger = Ledger(course, "gpu_tensors")
    assert ledger.get(me) is None and any("graded on another" in n for n in ledger.notes()[me])


def test_a_notebook_rewritten_in_place_after_the_due_date_is_left_for_review(
    course, tmp_path, monkeypatch
):
    """The folder was made on time; its notebook was rewritten in place after the due date
    (same file, so the folder's own date did not move). It escaped the late penalty, 30/30
    (an outside attack); the latest change of anything in the folder dates it now."""
    import datetime

    monkeypatch.setattr(importers, "BACKDATE_SLACK", datetime.timedelta(0))
    files = {"deep/notes.txt": b"on time", "gpu_tensors.ipynb": BLANK}
    folder, _, me = _on_time_attempt(course, tmp_path, files)
    with open(folder / "deep" / "notes.txt", "r+") as f:  # the same file: no new entry
        f.write("too late")
    [(student, fate, message)] = importers.import_exchange(course, "gpu_tensors")
    assert (student, fate) == (me, "needs review")
    assert "the folder, or a file in it, was made or last changed at" in message
    assert not (course / "submitted" / me).exists()


def _on_time_attempt(course, tmp_path, files: dict[str, bytes]):
    """An exchange folder of this user's holding ``files``, named with the time it is made,
    then the unit's due date set just after it: (the folder, its date, the user)."""
    import time

    from nbgrader.api import Gradebook

    me = __import__("pwd").getpwuid(os.geteuid()).pw_name
    when = _utc_now()
    folder = (
        _exchange_inbound(course, tmp_path) / f"{me}+gpu_tensors+{when:%Y-%m-%d %H:%M:%S.%f UTC}+a"
    )
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    time.sleep(0.05)
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        gb.update_or_create_assignment("gpu_tensors", duedate=_utc_now())
    time.sleep(0.05)
    return folder, when, me


def _utc_now():
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def test_a_folder_that_goes_while_its_date_is_checked_is_that_entrys_problem(tmp_path, monkeypatch):
    """A student may remove their folder between the listing and the date check: that
    entry is left with a reason, never the end of the collect. One nested deeper than
    Python recurses, or holding too many files, is dated or left for review, never a crash."""
    import datetime
    import types

    collect = types.SimpleNamespace(duedate=datetime.datetime(2026, 12, 1), walked={})
    gone = str(tmp_path / "gone")
    why = importers.SafeExchangeCollect._backdated(collect, gone, datetime.datetime(2026, 11, 1))
    assert why == "it could not be read when its date was checked"
    deep = tmp_path / "deep"
    deep.mkdir()
    monkeypatch.chdir(deep)  # nested by relative names: deeper than Python's recursion limit
    for _ in range(1_100):
        os.mkdir("d")
        os.chdir("d")
    try:
        assert importers._last_change(str(deep))[0] >= deep.stat().st_ctime
    finally:  # removed here: pytest's own clean-up recurses, and would fail on it later
        for _ in range(1_100):
            os.chdir("..")
            os.rmdir("d")
    # The bound is each student's, over all their attempts: many large old folders slow no
    # collect. Two attempts of 60% of it each: the first is dated, the second left for review.
    too_many = (
        f"it holds more than {importers.MAX_DATED_ENTRIES} files with the student's other "
        "attempts, too many to check its date"
    )
    attempts = [tmp_path / "attempt1", tmp_path / "attempt2"]
    for attempt in attempts:
        attempt.mkdir()
        for i in range(importers.MAX_DATED_ENTRIES * 6 // 10):
            (attempt / f"f{i}").touch()
    claimed = datetime.datetime(2026, 11, 1)
    tomorrow = datetime.datetime.now() + datetime.timedelta(days=1)
    collect = types.SimpleNamespace(duedate=tomorrow, walked={})  # on time: only the bound tells
    ada = [
        importers.SafeExchangeCollect._backdated(collect, str(a), claimed, "ada") for a in attempts
    ]
    assert ada == [None, too_many]
    assert (
        importers.SafeExchangeCollect._backdated(collect, str(attempts[1]), claimed, "bo") is None
    )
    # The attempt copied is dated again with the bound to itself: another student's copy
    # before it never uses it up (attack 22: one attempt of 9,994 empty files left every
    # classmate whose id sorts after its maker's uncollected, for review).
    copies = [importers.SafeExchangeCollect._backdated(collect, str(a), claimed) for a in attempts]
    assert copies == [None, None] and set(collect.walked) == {"ada", "bo"}


BLANK = nbformat.writes(make_submission(RELEASE, {})).encode()
OLD_BLACKBOARD_REGEXP = (  # the pattern this course shipped before: an id could hold no '_'
    r"^(?P<assignment>.*?)_(?P<student_id>[A-Za-z0-9][A-Za-z0-9.\-]*)_attempt_"
    r"(?P<timestamp>[0-9]{4}-[0-9]{2}-[0-9]{2}(?:-[0-9]{2}){0,3})_(?P<file_id>.+)$"
)


def test_lms_ids_keep_their_underscores_and_renamed_notebooks_are_taken(course, tmp_path):
    """Blackboard usernames may hold '_': a_smith and b_smith stay two students, stu_ada
    stays stu_ada, and a notebook the LMS renamed (gpu_tensors-1.ipynb) is the notebook."""
    entries = [
        ("gpu_tensors_a_smith_attempt_2024-03-01-10-00-00_gpu_tensors.ipynb", NB),
        ("gpu_tensors_b_smith_attempt_2024-03-01-11-00-00_gpu_tensors.ipynb", BLANK),
        ("gpu_tensors_stu_ada_attempt_2024-03-01_gpu_tensors-1.ipynb", NB),
        ("gpu_tensors_bo_attempt_2024-03-01_gpu_tensors (2).ipynb", NB),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert problems == []
    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == ["a_smith", "b_smith", "bo", "stu_ada"]
    assert (submitted / "a_smith" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == NB
    assert (submitted / "b_smith" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == BLANK
    assert (submitted / "stu_ada" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == NB
    assert (submitted / "bo" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == NB


def test_a_later_attempt_without_the_notebook_leaves_the_notebooks_date(course, tmp_path):
    """An on-time notebook, then notes alone after the due date: the notebook's attempt is
    the submission, with its date (the notes' date had made it late: 30/30 scored 0)."""
    entries = [
        ("gpu_tensors_kim_attempt_2024-03-01-10-00-00_gpu_tensors.ipynb", NB),
        ("gpu_tensors_kim_attempt_2024-03-02-10-00-00_notes.txt", b"forgot these"),
    ]
    assert importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries)) == []
    folder = course / "submitted" / "kim" / "gpu_tensors"
    assert (folder / "timestamp.txt").read_text() == "2024-03-01 10:00:00.000000 UTC"
    assert sorted(p.name for p in folder.iterdir()) == ["gpu_tensors.ipynb", "timestamp.txt"]


def test_two_lms_names_read_as_one_id_are_refused_never_merged(course, tmp_path):
    """Where a course's own named_regexp reads a_smith and b_smith both as 'smith', neither
    entry is taken and the problem names both."""
    config = course / "nbgrader_config.py"
    config.write_text(
        config.read_text()
        + "\nc.FileNameCollectorPlugin.named_regexp = "
        + repr(OLD_BLACKBOARD_REGEXP)
        + "\n"
    )
    entries = [
        ("gpu_tensors_a_smith_attempt_2024-03-01-10-00-00_gpu_tensors.ipynb", NB),
        ("gpu_tensors_b_smith_attempt_2024-03-01-11-00-00_gpu_tensors.ipynb", BLANK),
        ("gpu_tensors_cy_attempt_2024-03-01_gpu_tensors.ipynb", NB),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["cy"]
    [(student, fate, message)] = problems
    assert (student, fate) == ("smith", "needs review")
    assert "gpu_tensors_a_smith" in message and "gpu_tensors_b_smith" in message


def test_an_lms_entry_in_a_folder_never_stands_for_a_students_attempt(course, tmp_path):
    """Blackboard's download is flat: "x/<prefix>_vic1_attempt_<later>_..." (a name an upload
    could carry) is refused, and vic1's own attempt is the one taken (an outside attack made
    its empty notebook vic1's latest: 30 became 0). With a course's own pattern, the folder
    is part of what the LMS wrote, so the two names are two students, never merged."""
    entries = [
        ("gpu_tensors_vic1_attempt_2024-03-01-10-00-00_gpu_tensors.ipynb", NB),
        ("x/gpu_tensors_vic1_attempt_2024-03-02-10-00-00_gpu_tensors.ipynb", BLANK),
    ]
    download = make_zip(tmp_path / "d.zip", entries)
    problems = importers.import_zip(course, "gpu_tensors", download)
    assert (course / "submitted" / "vic1" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == NB
    assert [(s, f) for s, f, _ in problems] == [("", "no notebook")]
    config = course / "nbgrader_config.py"
    config.write_text(
        config.read_text()
        + "\nc.FileNameCollectorPlugin.named_regexp = "
        + repr(OLD_BLACKBOARD_REGEXP)
        + "\n"
    )
    problems = importers.import_zip(course, "gpu_tensors", download)
    assert [(s, f) for s, f, _ in problems] == [("vic1", "needs review")]
    assert not (course / "submitted" / "vic1" / "gpu_tensors").exists()  # for the instructor


def test_an_lms_prefix_other_than_the_assignment_id_is_configured(course, tmp_path):
    entries = [("Homework 1_stu_ada_attempt_2024-03-01_gpu_tensors.ipynb", NB)]
    download = make_zip(tmp_path / "d.zip", entries)
    [(_, _, message)] = importers.import_zip(course, "gpu_tensors", download)
    assert "c.LmsNames.assignment_prefix" in message
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nc.LmsNames.assignment_prefix = 'Homework 1'\n")
    assert importers.import_zip(course, "gpu_tensors", download) == []
    assert [p.name for p in (course / "submitted").iterdir()] == ["stu_ada"]


def test_collect_finds_the_exchange_that_plain_nbgrader_finds(course, tmp_path, monkeypatch):
    """`c.Exchange.root` set for everyone in /etc/jupyter/nbgrader_config.py (here: a folder
    on JUPYTER_CONFIG_PATH) is the exchange `course-grade --collect` collects from, as
    plain `nbgrader collect` does; the course's own setting wins over it."""
    exchange = tmp_path / "exchange"
    stamp = "2024-03-01 10:00:00.000000 UTC"
    inbound = exchange / "pytorch-tensors-on-the-gpu" / "inbound" / f"ada+gpu_tensors+{stamp}+x1"
    inbound.mkdir(parents=True)
    (inbound / "gpu_tensors.ipynb").write_bytes(NB)
    system = tmp_path / "etc-jupyter"
    system.mkdir()
    (system / "nbgrader_config.py").write_text(f"c.Exchange.root = {str(exchange)!r}\n")
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(system))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "home-jupyter"))  # none there
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text() + "\nc.ExchangeCollect.check_owner = False\n"
    )
    assert importers.import_exchange(course, "gpu_tensors") == []
    assert (course / "submitted" / "ada" / "gpu_tensors" / "gpu_tensors.ipynb").is_file()
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text()
        + f"\nc.Exchange.root = {str(tmp_path / 'none')!r}\n"
    )
    with pytest.raises(importers.ImportFailed):
        importers.import_exchange(course, "gpu_tensors")


def test_an_import_never_puts_an_older_attempt_over_a_newer_submission(course, tmp_path):
    """A submission already in submitted/ (from the exchange, say) that is newer than an
    LMS download's attempt stays, and the instructor is told; an older one is replaced."""
    for student, stamp in (
        ("ada", "2026-12-02 14:35:55.000000 UTC"),
        ("bo", "2026-12-01 09:00:00.000000 UTC"),
    ):
        folder = course / "submitted" / student / "gpu_tensors"
        folder.mkdir(parents=True)
        (folder / "gpu_tensors.ipynb").write_bytes(b"kept")
        (folder / "timestamp.txt").write_text(stamp)
    entries = [
        ("gpu_tensors_ada_attempt_2026-12-02-14-31-00_gpu_tensors.ipynb", NB),
        ("gpu_tensors_bo_attempt_2026-12-02-14-31-00_gpu_tensors.ipynb", NB),
    ]
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger("autograder.coordinator.importers")
    logger.addHandler(handler)
    try:
        importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    finally:
        logger.removeHandler(handler)
    ada = course / "submitted" / "ada" / "gpu_tensors"
    assert (ada / "gpu_tensors.ipynb").read_bytes() == b"kept"
    assert (ada / "timestamp.txt").read_text().startswith("2026-12-02 14:35:55")
    assert any(m.startswith("ada: kept the submission of 2026-12-02 14:35:55") for m in said)
    bo = course / "submitted" / "bo" / "gpu_tensors"
    assert (bo / "gpu_tensors.ipynb").read_bytes() == NB
    assert (bo / "timestamp.txt").read_text().startswith("2026-12-02 14:31:00")


def _warnings_of(run) -> list[str]:
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger("autograder.coordinator.importers")
    logger.addHandler(handler)
    try:
        run()
    finally:
        logger.removeHandler(handler)
    return said


def test_an_undated_folder_import_is_not_replaced_by_a_dated_attempt(course, tmp_path):
    """What the instructor put in submitted/ with --folder (no date) stays when a download
    or the exchange brings an attempt of that student; the instructor is told how to take
    it instead."""
    inbox_folder = tmp_path / "inbox"
    inbox_folder.mkdir()
    (inbox_folder / "ada.ipynb").write_bytes(BLANK)
    assert importers.import_folder(course, "gpu_tensors", inbox_folder) == []
    ada = course / "submitted" / "ada" / "gpu_tensors"
    assert not (ada / "timestamp.txt").exists()
    entries = [("gpu_tensors_ada_attempt_2026-12-02-14-31-00_gpu_tensors.ipynb", NB)]
    said = _warnings_of(
        lambda: importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    )
    assert (ada / "gpu_tensors.ipynb").read_bytes() == BLANK
    assert any(m.startswith("ada: kept the undated submission") for m in said), said
    assert any("remove that folder to take it" in m for m in said)


def test_with_chosen_students_an_import_takes_only_theirs(course, tmp_path):
    """course-grade --student ada --zip/--folder: the others' entries are not read and
    their submissions stay as they were."""
    bo = course / "submitted" / "bo" / "gpu_tensors"
    bo.mkdir(parents=True)
    (bo / "gpu_tensors.ipynb").write_bytes(b"bo's older work")
    entries = [
        ("gpu_tensors_ada_attempt_2024-03-01_gpu_tensors.ipynb", NB),
        ("gpu_tensors_bo_attempt_2024-03-01_gpu_tensors.ipynb", NB),
        ("gpu_tensors_cy_attempt_2024-03-01_gpu_tensors.ipynb", b"x" * 2_000_000),  # too big
    ]
    download = make_zip(tmp_path / "d.zip", entries)
    problems = importers.import_zip(course, "gpu_tensors", download, only={"ada"})
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["ada", "bo"]
    assert (bo / "gpu_tensors.ipynb").read_bytes() == b"bo's older work"
    assert [(s, f) for s, f, _ in problems] == [("", "note")]  # cy's problem is not ada's
    assert "2 other student(s) in d.zip left out (--student)" in problems[0][2]
    inbox_folder = tmp_path / "inbox"
    inbox_folder.mkdir()
    for student in ("bo", "dee"):
        (inbox_folder / f"{student}.ipynb").write_bytes(NB)
    importers.import_folder(course, "gpu_tensors", inbox_folder, only={"dee"})
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["ada", "bo", "dee"]
    assert (bo / "gpu_tensors.ipynb").read_bytes() == b"bo's older work"


def test_ids_that_differ_only_in_case_are_refused_never_two_students(course, tmp_path):
    """An LMS's usernames ignore case, nbgrader's ids do not: 'Ada' and 'ada' in one
    download are both refused; 'Bo' beside a 'bo' already in the course is refused and bo's
    submission stays. A refused spelling is said, never made a student with a fate (it
    would be a row of zeros, and would then refuse the real student's next attempt)."""
    bo = course / "submitted" / "bo" / "gpu_tensors"
    bo.mkdir(parents=True)
    (bo / "gpu_tensors.ipynb").write_bytes(b"bo's work")
    entries = [
        ("gpu_tensors_Ada_attempt_2024-03-01_gpu_tensors.ipynb", NB),
        ("gpu_tensors_ada_attempt_2024-03-02_gpu_tensors.ipynb", BLANK),
        ("gpu_tensors_Bo_attempt_2024-03-01_gpu_tensors.ipynb", NB),
        ("gpu_tensors_cy_attempt_2024-03-01_gpu_tensors.ipynb", NB),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["bo", "cy"]
    assert (bo / "gpu_tensors.ipynb").read_bytes() == b"bo's work"
    assert {fate for _, fate, _ in problems} == {"note"}
    said = [message for student, _, message in problems if not student]
    assert len(said) == 3 and all("differ only in case" in m for m in said)
    assert any(m.startswith("'Ada' and 'ada' (in this import)") for m in said)
    assert any(m.startswith("'Bo' and 'bo' (already in the course)") for m in said)
    # Said once, for the import: no note stays on bo, who did nothing (it would show in
    # every later summary), and no refused spelling becomes a student.
    assert [s for s, _, _ in problems if s] == []
    importers.record_problems(course, "gpu_tensors", problems)
    from autograder.coordinator.ledger import Ledger

    ledger = Ledger(course, "gpu_tensors")
    assert [e["student_id"] for e in ledger.entries()] == []
    assert list(ledger.notes()) == []
    inbox_folder = tmp_path / "inbox"
    inbox_folder.mkdir()
    (inbox_folder / "CY.ipynb").write_bytes(BLANK)
    problems = importers.import_folder(course, "gpu_tensors", inbox_folder)
    assert [(s, f) for s, f, _ in problems] == [("", "note")]
    assert "'CY' and 'cy'" in problems[0][2]
    assert not (course / "submitted" / "CY").exists()


def test_a_submission_without_a_date_never_keeps_an_older_attempts_date(course):
    """A folder import has no date: the gradebook's submission loses the older attempt's
    (nbgrader's autograde would keep it, and its late penalty)."""
    import datetime

    from nbgrader.api import Gradebook

    from autograder.config import grading_config
    from autograder.coordinator import grade
    from tests.class_fixture import copy_generated

    shutil.rmtree(course / "source")  # the same notebook, as generated
    copy_generated(course)
    url = grading_config(course).CourseDirectory.db_url
    with Gradebook(url) as gb:
        gb.update_or_create_student("ada")
        gb.update_or_create_submission(
            "gpu_tensors", "ada", timestamp=datetime.datetime(2099, 1, 1)
        )
    grade._save_grades(course, "gpu_tensors", "ada", {}, None)
    with Gradebook(url) as gb:
        assert gb.find_submission("gpu_tensors", "ada").timestamp is None
    grade._save_grades(course, "gpu_tensors", "ada", {}, "2024-03-01 10:00:00 UTC")
    with Gradebook(url) as gb:
        stamp = gb.find_submission("gpu_tensors", "ada").timestamp
    assert stamp == datetime.datetime(2024, 3, 1, 10, 0)


# nbgrader's own documented example: greedy, so it reads a name from its last match.
NBGRADER_EXAMPLE = r".*_(?P<student_id>\w+)_attempt_(?P<timestamp>[0-9\-]+)_(?P<file_id>.*)"


def test_a_configured_regexp_never_reads_whose_or_when_from_the_students_own_file_name(
    course, tmp_path
):
    """Attack 19, a02-a04: with the course's named_regexp, a student's own file name
    (which the LMS puts after what it writes) took another student's id: bob's real
    notebook was refused as a clash, dave who sent nothing was graded on it; carol's file
    name gave her an earlier date than the LMS's, and no late penalty."""
    (course / "nbgrader_config.py").write_text(
        (course / "nbgrader_config.py").read_text()
        + f"\nc.FileNameCollectorPlugin.named_regexp = {NBGRADER_EXAMPLE!r}\n"
    )
    entries = [
        ("gpu_tensors_bob_attempt_2026-12-03-10-00-00_gpu_tensors.ipynb", NB),
        (
            "gpu_tensors_alice_attempt_2026-12-04-10-00-00_"
            "x_bob_attempt_2026-12-05-00-00-00_gpu_tensors.ipynb",
            b"alice's",
        ),
        (
            "gpu_tensors_alice_attempt_2026-12-04-11-00-00_"
            "y_dave_attempt_2026-12-01-00-00-00_gpu_tensors.ipynb",
            b"alice's",
        ),
        (
            "gpu_tensors_carol_attempt_2026-12-20-10-00-00_"
            "z_carol_attempt_2026-12-05-00-00-00_gpu_tensors.ipynb",
            NB,
        ),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    submitted = course / "submitted"
    assert (submitted / "bob" / "gpu_tensors" / "gpu_tensors.ipynb").read_bytes() == NB
    assert sorted(p.name for p in submitted.iterdir()) == ["bob"]
    said = {(s, fate) for s, fate, _ in problems}
    assert said == {("alice", "needs review"), ("carol", "needs review")}, problems
    assert all("the file name the student gave holds what an LMS writes" in m for *_, m in problems)


def test_nbgraders_own_files_in_a_download_are_left_out_with_a_note(course, tmp_path):
    """Attack 19, a14: an uploaded submission_secret.txt chose the name the student's page
    is published under (a classmate's, if they had read it): nbgrader writes these."""
    entries = [
        ("gpu_tensors_ada_attempt_2026-12-01-10-00-00_gpu_tensors.ipynb", NB),
        ("gpu_tensors_ada_attempt_2026-12-01-10-00-00_submission_secret.txt", b"A" * 64),
        ("gpu_tensors_ada_attempt_2026-12-01-10-00-00_timestamp.txt", b"2020-01-01 00:00:00"),
    ]
    problems = importers.import_zip(course, "gpu_tensors", make_zip(tmp_path / "d.zip", entries))
    assert sorted((s, fate) for s, fate, _ in problems) == [("ada", "note"), ("ada", "note")]
    folder = course / "submitted" / "ada" / "gpu_tensors"
    assert sorted(p.name for p in folder.iterdir()) == ["gpu_tensors.ipynb", "timestamp.txt"]
    assert (folder / "timestamp.txt").read_text().startswith("2026-12-01 10:00:00")


def test_a_folder_imports_secret_is_left_out(course, tmp_path):
    inbox_folder = tmp_path / "in" / "ada"
    inbox_folder.mkdir(parents=True)
    (inbox_folder / "gpu_tensors.ipynb").write_bytes(NB)
    (inbox_folder / "submission_secret.txt").write_text("A" * 64)
    assert importers.import_folder(course, "gpu_tensors", tmp_path / "in") == []
    kept = course / "submitted" / "ada" / "gpu_tensors"
    assert sorted(p.name for p in kept.iterdir()) == ["gpu_tensors.ipynb"]


def test_a_secret_two_students_submitted_names_neither_ones_page(course, monkeypatch):
    """Attack 19, a06: mallory put bob's submission_secret.txt (read from his nbgrader
    cache) into her own submission; release_feedback published her page under his page's
    name, and bob's fetch_feedback got her 0/30. Now both get new random secrets, and the
    later one's details say why."""
    from autograder.coordinator import grade
    from autograder.job import Result

    monkeypatch.setattr(grade, "_save_grades", lambda *a: (30.0, 30.0))
    shared, own = "b" * 64, "c" * 64

    def record(student, secret):
        outcome = {"student_id": student, "fate": "graded", "details": []}
        files = {"gpu_tensors.ipynb": b"{}"}
        page = {"gpu_tensors.html": student.encode()}
        return grade.record(course, "gpu_tensors", Result(outcome, files, page, None, secret))

    def secret_of(student, kind="feedback"):
        return (course / kind / student / "gpu_tensors" / "submission_secret.txt").read_text()

    record("bob", shared)
    record("carol", own)
    assert secret_of("bob") == shared
    outcome = record("mallory", shared)
    assert {secret_of("bob"), secret_of("mallory")}.isdisjoint({shared}), "still shared"
    assert secret_of("bob") != secret_of("mallory")
    assert secret_of("bob", "autograded") == secret_of("bob")
    assert secret_of("carol") == own
    assert any("also in the submission of bob" in d for d in outcome["details"])


def test_a_run_reads_each_classmates_secret_once_not_once_per_submission(course, monkeypatch):
    """One SecretHolders for a run: the class's secrets are read at its first record and kept
    as it writes pages (read afresh for every record, a class of n cost n * n reads); a
    secret copied later in the run is still found, and read again before it is acted on."""
    from autograder.coordinator import grade
    from autograder.job import Result

    monkeypatch.setattr(grade, "_save_grades", lambda *a: (30.0, 30.0))
    reads = []
    read_bytes = safefiles.read_bytes

    def counted(path, *args, **kwargs):
        if Path(path).name == "submission_secret.txt":
            reads.append(Path(path).parent.parent.name)
        return read_bytes(path, *args, **kwargs)

    monkeypatch.setattr(safefiles, "read_bytes", counted)

    def record(student, secret, holders):
        outcome = {"student_id": student, "fate": "graded", "details": []}
        files = {"gpu_tensors.ipynb": b"{}"}
        page = {"gpu_tensors.html": student.encode()}
        result = Result(outcome, files, page, None, secret)
        return grade.record(course, "gpu_tensors", result, holders)

    for i in range(3):  # an earlier run's pages
        record(f"old{i}", f"{i}" * 64, None)
    reads.clear()
    holders = grade.SecretHolders(course, "gpu_tensors")
    for i in range(8):
        record(f"s{i}", chr(ord("a") + i) * 64, holders)
    assert sorted(reads) == ["old0", "old1", "old2"]  # once each, at the first record
    outcome = record("mallory", "c" * 64, holders)  # s2's secret, written in this run
    assert any("also in the submission of s2" in d for d in outcome["details"])
    assert reads.count("s2") == 1  # read again from its file before it was acted on
    assert (course / "feedback" / "s2" / "gpu_tensors" / "submission_secret.txt").read_text() != (
        "c" * 64
    )


def test_a_secret_with_unicode_whitespace_after_it_is_no_secret_on_either_side():
    """The worker and ``SecretHolders`` strip nbgrader's files alike: a classmate's secret
    with ``\\x1c`` after it is not that secret to one and no secret to the other."""
    from autograder.coordinator import grade
    from autograder.job import Result
    from autograder.worker.worker import nbgrader_text

    copied = "c" * 64 + "\x1c"
    kept = nbgrader_text(b" " + copied.encode() + b"\n")
    assert kept == copied and not grade.SECRET.fullmatch(kept)
    files = grade.exchange_files(Result({}, {}, {}, None, kept))
    assert files["submission_secret.txt"] != b"c" * 64  # a fresh one, as for none at all


def test_collect_names_the_students_whose_home_others_may_enter(tmp_path, monkeypatch):
    """Attack 19, a08: nbgrader submit keeps each secret in the student's home; where
    others may enter it, a classmate fetched their page (Debian's useradd made 0755)."""
    import types

    homes = {"ada": tmp_path / "ada", "bo": tmp_path / "bo", "cy": tmp_path / "cy"}
    for name, mode in (("ada", 0o700), ("bo", 0o755), ("cy", 0o711)):
        homes[name].mkdir()
        homes[name].chmod(mode)

    def getpwnam(name):
        if name not in homes:
            raise KeyError(name)
        return types.SimpleNamespace(pw_dir=str(homes[name]))

    monkeypatch.setattr(importers.pwd, "getpwnam", getpwnam)
    assert importers.open_homes(["cy", "ada", "bo", "no_such_user", "bo"]) == ["bo", "cy"]


def test_a_secret_copied_from_a_submission_not_yet_graded_names_neither_page(course, monkeypatch):
    """Attack 25: the copier graded before the secret's owner (an earlier run, or earlier
    in the same one) kept the owner's secret, since no page held it yet; a release_feedback
    between the two runs handed the copier's page to the owner's fetch_feedback. A secret
    that another student's submission holds now names neither page."""
    from autograder.coordinator import grade
    from autograder.job import Result

    monkeypatch.setattr(grade, "_save_grades", lambda *a: (30.0, 30.0))
    shared = "v" * 64
    for student in ("vic", "att"):  # att's holds a copy of vic's
        handed_in = course / "submitted" / student / "gpu_tensors"
        handed_in.mkdir(parents=True)
        (handed_in / "submission_secret.txt").write_text(shared)

    def record(student, secret):
        outcome = {"student_id": student, "fate": "graded", "details": []}
        files = {"gpu_tensors.ipynb": b"{}"}
        page = {"gpu_tensors.html": student.encode()}
        holders = grade.SecretHolders(course, "gpu_tensors")
        return grade.record(
            course, "gpu_tensors", Result(outcome, files, page, None, secret), holders
        ), holders

    def secret_of(student):
        return (course / "feedback" / student / "gpu_tensors" / "submission_secret.txt").read_text()

    outcome, holders = record("att", shared)  # vic is not graded yet
    assert secret_of("att") != shared
    assert any("also in the submission of vic" in d for d in outcome["details"])
    assert holders.renamed == {}  # vic has no page to rename: nothing to say on vic's line
    outcome, holders = record("vic", shared)  # graded later: att's page exists now
    assert secret_of("vic") != shared and secret_of("att") != shared
    assert secret_of("vic") != secret_of("att")
    assert any("also in the submission of att" in d for d in outcome["details"])
    assert "vic" in holders.renamed["att"]  # att's own line is told its page was renamed


@pytest.mark.parametrize("text", ["\ud800", "\udfff and more", "a pair \U0001f600 is fine"])
def test_a_notebook_holding_a_lone_surrogate_is_invalid_and_says_so(course, text):
    """JSON's \\ud800 escape is half a character, which no UTF-8 file can hold: nbgrader
    could not write the graded notebook, and the fate was the grader's own `error`. An
    emoji written as two escapes is one character, and is graded."""
    import json

    nb = make_submission(RELEASE, SOLUTIONS)
    nb.cells[-1].source += f"\n# {text}\n"
    files = {"gpu_tensors.ipynb": json.dumps(nb, ensure_ascii=True).encode()}
    cells = inbox.source_cells(course, "gpu_tensors")
    found = inbox.problem(files, [], ["gpu_tensors.ipynb"], cells)
    if "pair" in text:
        assert found is None
    else:
        assert found[0] == "invalid notebook" and "lone surrogate" in found[1], found


def test_a_file_name_that_is_not_utf8_is_hashed_by_its_bytes():
    """Python reads b"notes\\xff.txt" as "notes\\udcff.txt": hashing it raised, and
    course-grade stopped before grading anyone in the class (attack 35)."""
    odd = {"notes\udcff.txt": b"hello\n", "gpu_tensors.ipynb": b"{}"}
    plain = {"notes.txt": b"hello\n", "gpu_tensors.ipynb": b"{}"}
    assert inbox.digest(odd, ["notes\udcff.txt: refused"]) != inbox.digest(plain, [])
