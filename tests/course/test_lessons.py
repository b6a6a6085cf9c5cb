"""What every lesson has (shared/units.md), for every unit: it runs on the CPU, its header,
its links to the other units (working on Colab, both ways), its committed outputs, its
stated time, its Check yourself and its Sources. Each unit's own content is tested in
test_lesson.py (gpu_tensors) and test_lesson_<unit>.py."""

from __future__ import annotations

import re

import pytest
import tomllib
from lessons import (
    SETUP_CELL,
    committed,
    deliberate_outputs,
    executed,
    executed_on_gpu,
    main_path_and_further,
    markdown,
    minutes,
    stated_time,
)
from units import ROOT, UNITS, lesson, release

LEVELS = ("Beginner", "Intermediate", "Advanced")


def _slug() -> str:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["urls"]["Repository"].removeprefix(
            "https://github.com/"
        )


def _header_part(nb, label: str) -> str:
    """The header's paragraph that starts with **label**."""
    header = nb.cells[0].source
    found = re.search(rf"\*\*{re.escape(label)}[:*]*\*?\*?(.*?)(?=\n\n|\Z)", header, flags=re.S)
    assert found, f"the header has no **{label}** paragraph"
    return found.group(1)


def _linked_units(text: str) -> set[str]:
    """Units a header paragraph links to, each by a Colab link and by a relative link."""
    colab = set(
        re.findall(
            rf"https://colab\.research\.google\.com/github/{re.escape(_slug())}"
            r"/blob/main/notebooks/(\w+)\.ipynb",
            text,
        )
    )
    relative = set(re.findall(r"\]\((\w+)\.ipynb\)", text))
    assert colab == relative, (
        f"each unit needs a Colab link and a relative link: Colab {colab}, relative {relative}"
    )
    return colab


def test_every_unit_has_its_lesson_source_and_release():
    lessons = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
    assert lessons == sorted(UNITS)
    for unit in UNITS:
        assert lesson(unit).is_file() and release(unit).is_file()
        assert (ROOT / "source" / unit / f"{unit}.ipynb").is_file()


def _errors(nb) -> list:
    return [
        (c.source[:60], o.ename, o.evalue)
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]


def _stderr(nb) -> list:
    return [
        (c.source[:60], o.text[:200])
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "stream" and o.name == "stderr"
    ]


@pytest.mark.parametrize("unit", UNITS)
def test_no_cell_errors(unit):
    nb = executed(unit)
    assert _errors(nb) == []
    assert _stderr(nb) == [], "a lesson cell wrote to stderr (a warning a learner would see)"


@pytest.mark.gpu
@pytest.mark.parametrize("unit", UNITS)
def test_no_cell_errors_on_the_gpu(unit):
    """Each lesson as it is, on a CUDA GPU (its own GPU tests read what it showed)."""
    nb = executed_on_gpu(unit)
    assert _errors(nb) == []
    assert _stderr(nb) == [], (
        "a lesson cell wrote to stderr on the GPU (a warning a learner would see)"
    )


@pytest.mark.parametrize("unit", UNITS)
def test_first_code_cell_is_the_colab_set_up_cell_and_colab_offers_a_gpu(unit):
    nb = committed(unit)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == SETUP_CELL
    assert nb.metadata["accelerator"] == "GPU"
    assert nb.metadata["colab"] == {"provenance": [], "gpuType": "T4"}


@pytest.mark.parametrize("unit", UNITS)
def test_committed_notebook_keeps_only_the_deliberate_outputs(unit):
    """Figures and widget fallbacks, exactly as the code makes them now: nothing else, and
    nothing stale."""
    nb = committed(unit)
    with_outputs = {
        c.id: [dict(o) for o in c.outputs] for c in nb.cells if c.cell_type == "code" and c.outputs
    }
    assert with_outputs == deliberate_outputs(unit)
    assert all(c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert "widgets" not in nb.metadata  # no widget state: the HTML fallback stands in


@pytest.mark.parametrize("unit", UNITS)
def test_header_states_title_level_time_and_three_to_six_outcomes(unit):
    nb = committed(unit)
    header = nb.cells[0].source
    assert re.match(r"# \S", header)
    level = re.search(r"\*\*Level:\*\* (\w+)", header)
    assert level and level[1] in LEVELS
    stated_time(nb)
    outcomes = re.search(r"\*\*After this unit you can\*\*\n((?:- .*\n?)+)", header)
    assert outcomes and 3 <= len(outcomes[1].strip().splitlines()) <= 6


@pytest.mark.parametrize("unit", UNITS)
def test_links_to_other_units_name_real_units_work_on_colab_and_go_both_ways(unit):
    nb = committed(unit)
    first = _linked_units(_header_part(nb, "Read these first"))
    after = _linked_units(_header_part(nb, "Units that build on this one"))
    assert first <= set(UNITS) and after <= set(UNITS) and unit not in first | after
    position = UNITS.index(unit)
    assert all(UNITS.index(u) < position for u in first), "a unit to read first comes earlier"
    assert all(UNITS.index(u) > position for u in after), "a unit that builds on it comes later"
    for other in UNITS:
        if other == unit:
            continue
        theirs = committed(other)
        if other in first:
            assert unit in _linked_units(_header_part(theirs, "Units that build on this one")), (
                other
            )
        if other in after:
            assert unit in _linked_units(_header_part(theirs, "Read these first")), other
    for name in first | after:
        assert lesson(name).is_file()


@pytest.mark.parametrize("unit", UNITS)
def test_the_stated_time_matches_the_main_path(unit):
    nb = committed(unit)
    main_stated, further_stated = stated_time(nb)
    main, further = main_path_and_further(nb)
    assert abs(minutes(main) - main_stated) <= 5, minutes(main)
    assert abs(minutes(further) - further_stated) <= 3, minutes(further)


@pytest.mark.parametrize("unit", UNITS)
def test_every_prediction_is_asked_before_a_cell_that_answers_it(unit):
    """A prompt is followed by a code cell in its own section, and a folded answer, if any,
    comes after the prompt."""
    cells = committed(unit).cells
    prompts = [
        i for i, c in enumerate(cells) if c.cell_type == "markdown" and "**Predict" in c.source
    ]
    assert prompts, "a lesson asks the learner to predict"
    for i in prompts:
        later = cells[i + 1 :]
        code = next((j for j, c in enumerate(later) if c.cell_type == "code"), None)
        heading = next(
            (
                j
                for j, c in enumerate(later)
                if c.cell_type == "markdown" and re.search(r"^##? ", c.source, flags=re.M)
            ),
            len(later),
        )
        assert code is not None and code <= heading, cells[i].source[:80]
        prompt_at = cells[i].source.rindex("**Predict")
        if "<details>" in cells[i].source[prompt_at:]:
            assert cells[i].source.index("<details>", prompt_at) > prompt_at


@pytest.mark.parametrize("unit", UNITS)
def test_check_yourself_has_three_or_more_folded_answers_and_links_the_graded_version(unit):
    text = markdown(committed(unit))
    section = text.split("## Check yourself", 1)[1].split("## Go further", 1)[0]
    assert section.count("<details><summary>Answer</summary>") >= 3
    colab = (
        f"https://colab.research.google.com/github/{_slug()}/blob/main/release/{unit}/{unit}.ipynb"
    )
    assert f"[open it in Colab]({colab})" in section
    relative = re.search(r"\]\((\.\./release/[^)]+)\)", section).group(1)
    assert (ROOT / "notebooks" / relative).resolve() == release(unit)


@pytest.mark.parametrize("unit", UNITS)
def test_sections_in_order_and_sources_last(unit):
    text = markdown(committed(unit))
    headings = [
        "Read these first",
        "Units that build on this one",
        "After this unit you can",
        "## Check yourself",
        "## Go further",
        "## Where this shows up",
        "## Sources",
    ]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions)
    sources = text.split("## Sources", 1)[1]
    links = re.findall(r"\]\((https://[^)]+)\)", sources)
    assert len(links) >= 5 and len(set(links)) == len(links)


@pytest.mark.parametrize("unit", UNITS)
def test_the_readme_lists_the_lesson_with_its_time(unit):
    readme = (ROOT / "README.md").read_text()
    learners = readme.split("<!-- BEGIN LEARNERS -->", 1)[1].split("<!-- END LEARNERS -->", 1)[0]
    main, further = stated_time(committed(unit))
    assert (
        f"`notebooks/{unit}.ipynb` (about {main} minutes, and {further} more for its optional"
        in " ".join(learners.split())
    )


@pytest.mark.parametrize("unit", UNITS)
def test_the_device_error_is_quoted_only_as_far_as_its_stable_beginning(unit):
    """CUDA's same-device message names the devices after its first words, differently in
    different PyTorch releases: a lesson quotes only the stable beginning."""
    text = " ".join(markdown(committed(unit)).split())
    assert "but found at least two devices" not in text
    if "Expected all tensors" in text:
        assert "`Expected all tensors to be on the same device`" in text
