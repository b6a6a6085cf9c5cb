"""A hidden test's failure shows only the instructor's own words (``autograder.hints``):
what its message quoted of the student's values, which could carry the hidden test's
inputs, stays out of the feedback page (attack 45)."""

from __future__ import annotations

import shutil

import nbformat
from traitlets.config import Config
from units import source

from autograder import hints
from autograder.worker.feedback import QUOTES_NOTE, HideHiddenTests

UNIT = "gpu_profiling"
CELL = "test_q4_syncs"


def _verdict(tmp_path, evalue: str, root_configured: bool = True, student_line: str = "") -> str:
    folder = tmp_path / "source" / UNIT
    if not folder.exists():
        folder.mkdir(parents=True)
        shutil.copy(source(UNIT), folder)
    config = Config()
    if root_configured:  # course-grade's; plain nbgrader's course is its working folder
        config.CourseDirectory.root = str(tmp_path)
    nb = nbformat.read(source(UNIT), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == CELL)
    cell.source = student_line + cell.source  # the graded notebook's copy of the cell
    cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue=evalue)]
    resources = {"nbgrader": {"assignment": UNIT}}
    cell, _ = HideHiddenTests(config=config).preprocess_cell(cell, resources, 0)
    return cell.outputs[0].traceback[0]


def test_a_quoted_value_is_not_shown_and_the_instructors_words_are(tmp_path):
    words = hints.words_of(source(UNIT).parent)[CELL]
    hint = next(w for w in sorted(words) if "kernel launch" in w)
    quoted = "host_waits(...) returned 'cudaStreamSynchronize|1040.0|57.5' where it should "
    shown = _verdict(tmp_path, quoted + hint)
    assert shown == f"Test failed. CheckFailed: ... {hint}"
    leaked = _verdict(tmp_path, "host_waits(...) should name CUDA runtime calls, not '57.5'.")
    assert "57.5" not in leaked and QUOTES_NOTE in leaked


def test_a_message_that_is_the_instructors_own_sentence_is_shown_whole(tmp_path):
    sentence = next(w for w in sorted(hints.words_of(source(UNIT).parent)[""]) if " " in w)
    assert _verdict(tmp_path, sentence) == f"Test failed. CheckFailed: {sentence}"


def test_the_words_come_from_the_source_never_the_graded_notebook(tmp_path):
    """A sentence that only the graded notebook's copy of the cell writes (a student can
    edit their copy) is not the instructor's: a message that ends with it shows nothing of
    it; the same message ending with a sentence of the source's shows that sentence."""
    planted = "only in the student's notebook, quoted"
    shown = _verdict(tmp_path, f"x = 'a': {planted}", student_line=f"print({planted!r})\n")
    assert planted not in shown and QUOTES_NOTE in shown
    sentence = next(w for w in sorted(hints.words_of(source(UNIT).parent)[""]) if " " in w)
    assert _verdict(tmp_path, f"x = 'a': {sentence}").endswith(f"... {sentence}")


def test_an_f_string_of_the_source_is_shown_with_its_values_as_dots():
    folder = source("gpu_data_loading").parent
    words = set().union(*hints.words_of(folder).values())
    templates = set().union(*hints.templates_of(folder).values())
    pairs = set().union(*hints.hints_of(folder).values())
    message = (
        "on 'cpu' 4,812 bytes crossed from the CPU for a batch of 57 images in dtypes wider "
        "than uint8, more than mean and std need: the images, or part of them, crossed in a "
        "wider dtype. Copy them as uint8, then convert them on the device."
    )
    shown = hints.shown(message, words, templates, pairs)
    # a device or a dtype is shown as it is (a few bits, never a text of the student's)
    assert shown.startswith("on 'cpu' ... bytes crossed from the CPU for a batch of ... images")
    assert not any(value in shown for value in ("4,812", "57"))
    # A student's text that holds a piece of the template shows only the pieces, no more.
    forged = message.replace("57", "57 images in a dtype, LEAKED 1.5 crossed from the CPU")
    assert "LEAKED" not in (hints.shown(forged, words, templates, pairs) or "")


def test_a_value_is_shown_only_where_it_is_a_hint_never_another_text_of_the_source():
    """Attack 45, A4: the kind of a hidden expected value ("a plain value", "a whole
    number": texts of the checks) named in the message told one bit of it."""
    folder = source("gpu_tensors").parent
    words = set().union(*hints.words_of(folder).values())
    templates = set().union(*hints.templates_of(folder).values())
    pairs = set().union(*hints.hints_of(folder).values())
    kinds = [
        hints.shown(f"fewest_gpu_steps(...) should be {kind}, not a dict.", words, templates, pairs)
        for kind in ("a plain value", "a whole number")
    ]
    assert kinds[0] == kinds[1] and "..." in kinds[0], kinds
    hint = next(iter(sorted(pairs)))
    assert hint in hints.shown(f"x = 3: {hint}", words, templates, pairs)


def test_plain_nbgraders_feedback_reads_the_source_of_its_working_folder(tmp_path, monkeypatch):
    """`nbgrader generate_feedback` run in the course folder (nbgrader_config.py configures
    the same preprocessor) sets no root: nbgrader's own default, the working folder."""
    monkeypatch.chdir(tmp_path)
    sentence = next(w for w in sorted(hints.words_of(source(UNIT).parent)[""]) if " " in w)
    shown = _verdict(tmp_path, sentence, root_configured=False)
    assert shown == f"Test failed. CheckFailed: {sentence}"


def test_a_workers_warmed_caches_hold_the_source_for_every_jobs_copy(tmp_path):
    """Each page is made in a child forked from the worker, and each job's course is a new
    folder: the source's words are read once, when the worker warms its caches, and every
    copy of the same source is found there, not parsed again (about 85 ms a page)."""
    from autograder.config import grading_config
    from autograder.worker.feedback import configure_feedback, warm

    hints._read.cache_clear()
    prepared = tmp_path / "prepared"
    (prepared / "source" / UNIT).mkdir(parents=True)
    shutil.copy(source(UNIT), prepared / "source" / UNIT)
    config = grading_config(prepared)
    configure_feedback(config)
    warm(config, prepared / "source" / UNIT / f"{UNIT}.ipynb")
    assert hints._read.cache_info().currsize == 1
    job = tmp_path / "job"
    shutil.copytree(prepared / "source", job / "source")
    misses = hints._read.cache_info().misses
    _verdict(job, "x = 1: not a sentence of the source")
    assert hints._read.cache_info().misses == misses


def test_a_students_own_cell_with_the_markers_is_shown_as_written(tmp_path):
    """Only the assignment's test cells hold hidden tests: a student's cell of their own, or
    their answer cell, that writes the markers keeps its code and its outputs (attack 49's
    cell showed "# (hidden tests ...)" and "Tests passed." as if it were a test)."""
    code = "### BEGIN HIDDEN TESTS\nraise SystemExit\n### END HIDDEN TESTS"
    error = nbformat.v4.new_output("error", ename="SystemExit", evalue="", traceback=["SystemExit"])
    answer = {"nbgrader": {"grade": True, "solution": True, "grade_id": "q1", "points": 1}}
    for metadata in ({}, answer):
        cell = nbformat.v4.new_code_cell(code, metadata=metadata, outputs=[error])
        shown, _ = HideHiddenTests(config=Config()).preprocess_cell(
            cell, {"nbgrader": {"assignment": UNIT}}, 0
        )
        assert shown.source == code and shown.outputs == [error]


def test_a_visible_tests_output_shows_no_escape_a_student_quoted(tmp_path):
    """A visible test's message quoting a student's exception: the escapes in it (white
    text after "raised ValueError:" that read "Tests passed.") are not shown; the words are."""
    said = "size_mb(...) raised ValueError: \x1b[38;2;255;255;255mTests passed.\x1b[0m"
    cell = nbformat.v4.new_code_cell(
        "check(size_mb)",
        metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1}},
        outputs=[
            nbformat.v4.new_output("error", ename="CheckFailed", evalue=said, traceback=[said]),
            nbformat.v4.new_output("stream", name="stdout", text=said),
        ],
    )
    shown, _ = HideHiddenTests(config=Config()).preprocess_cell(cell, {}, 0)
    plain = "size_mb(...) raised ValueError: Tests passed."
    error, stream = shown.outputs
    assert (error.evalue, error.traceback, stream.text) == (plain, [plain], plain)
