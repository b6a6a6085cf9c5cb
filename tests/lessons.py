"""Shared by the lesson tests: each lesson executed once per test session, and helpers to
read it. No pytest here.

``executed(unit)`` runs the lesson top to bottom on the CPU (any GPU hidden), with the
unit's probe cells appended: code that reads back what the lesson's widget runs on.
``deliberate_outputs(unit)`` is what the committed lesson may keep as outputs: figures
and the widgets' static fallbacks, exactly as the code makes them now.
"""

from __future__ import annotations

import os
import re
from functools import cache

import nbclient
import nbformat
from units import lesson

SETUP_CELL = '''# Set-up. On Colab this installs the course's helper package, without touching
# Colab's own torch or ipywidgets; everywhere else it is already installed.
import importlib.util, sys
if importlib.util.find_spec("gpucourse") is None and "google.colab" in sys.modules:
    %pip install --quiet --no-deps "gpucourse @ git+https://github.com/gpu-course/pytorch-tensors-on-the-gpu"'''

PROBES = {
    # What the race's measured mode runs on, read back after the lesson ran.
    "gpu_tensors": """
measured = race.races["measured"]
print(f"race CPU step: {measured.cpu_step:.3f} ms")
print(f"race GPU assumed: {measured.gpu_assumed}")
print(measured.crossover_sentence())
""",
    # The lesson's training widget trains, in the lesson's own kernel, on its device.
    "gpu_training": """
trainer.max_steps = 300
await trainer.play(pause=0)
print(trainer.status_text)
print(trainer.trainer.device, len(trainer.trainer.readings))
""",
    # The lesson's timeline runs on the speeds the lesson measured, then on the assumed ones.
    "gpu_data_loading": """
timeline.mode.value = "measured"
timeline.play_now()
print(timeline.status_text)
timeline.mode.value = "assumed"
print(timeline.status_text)
""",
    # The lesson's timeline walks the slow loop's own trace, recorded in the lesson's kernel.
    "gpu_profiling": """
timeline.next.click()
print(timeline.status_text)
timeline.gap.click()
print(timeline.status_text)
for summary in timeline.summaries():
    print(summary.line())
""",
}


@cache
def executed(unit: str) -> nbformat.NotebookNode:
    """The lesson, run top to bottom on the CPU, with its probe cell (id ``probe``) last."""
    path = lesson(unit)
    nb = nbformat.read(path, as_version=4)
    if unit in PROBES:
        nb.cells.append(nbformat.v4.new_code_cell(PROBES[unit].strip(), id="probe"))
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the CPU lesson, tested the same way everywhere
    try:
        nbclient.NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    finally:
        if hidden is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES")
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = hidden
    return nb


def committed(unit: str) -> nbformat.NotebookNode:
    return nbformat.read(lesson(unit), as_version=4)


@cache
def executed_on_gpu(unit: str) -> nbformat.NotebookNode:
    """The lesson, run top to bottom as it is, where a GPU is (the gpu-marked tests)."""
    path = lesson(unit)
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    if os.environ.get("LESSONS_OUT"):  # scripts/check-on-gpu keeps what each lesson showed
        nbformat.write(nb, os.path.join(os.environ["LESSONS_OUT"], f"{unit}.ipynb"))
    return nb


def fixtures(unit: str, on_gpu: bool = False):
    """A unit's lesson test module's fixtures, ``committed`` and ``executed`` (module
    scope; ``on_gpu``: executed on the GPU): ``committed, executed = fixtures(UNIT)``."""
    import pytest

    @pytest.fixture(scope="module")
    def committed_fixture():
        return committed(unit)

    @pytest.fixture(scope="module")
    def executed_fixture():
        return executed_on_gpu(unit) if on_gpu else executed(unit)

    return committed_fixture, executed_fixture


def deliberate_outputs(unit: str) -> dict[str, list[dict]]:
    """The only outputs the committed lesson keeps, by cell id, as the code makes them now.
    Rewrite them by pasting these into the notebook's cells (or run the cell and keep only
    these mime types)."""
    if unit == "gpu_tensors":
        from IPython.display import SVG

        from gpucourse.figures import two_processors_svg
        from gpucourse.race_widget import RaceWidget

        bundle = RaceWidget()._repr_mimebundle_()
        race = {key: bundle[key] for key in ("text/html", "text/plain")}
        return {
            "52a2c7a7": [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {
                        "image/svg+xml": two_processors_svg(),
                        "text/plain": repr(SVG(two_processors_svg())),
                    },
                }
            ],
            "931f10a3": [{"output_type": "display_data", "metadata": {}, "data": race}],
        }
    if unit == "gpu_training":
        from gpucourse.training_widget import TrainingWidget

        bundle = TrainingWidget()._repr_mimebundle_()
        return {
            "a5widget": [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {key: bundle[key] for key in ("text/html", "text/plain")},
                }
            ]
        }
    if unit == "gpu_data_loading":
        from gpucourse.pipeline_widget import PipelineWidget

        bundle = PipelineWidget()._repr_mimebundle_()
        return {
            "pipelinewidget": [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {key: bundle[key] for key in ("text/html", "text/plain")},
                }
            ]
        }
    if unit == "gpu_profiling":
        from gpucourse.timeline_widget import TimelineWidget
        from gpucourse.trace_timeline import Event

        bundle = TimelineWidget([Event("CPU thread 1", "aten::mm", 0.0, 1.0, "cpu_op")])
        bundle = bundle._repr_mimebundle_()
        return {
            "timelinewidget": [
                {
                    "output_type": "display_data",
                    "metadata": {},
                    "data": {key: bundle[key] for key in ("text/html", "text/plain")},
                }
            ]
        }
    raise KeyError(f"no deliberate outputs listed for {unit}: add them to tests/lessons.py")


def cell_with(nb, snippet: str):
    matches = [c for c in nb.cells if c.cell_type == "code" and snippet in c.source]
    assert len(matches) == 1, f"expected one code cell containing {snippet!r}"
    return matches[0]


def printed(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces."""
    return " ".join(text.split())


def main_path_and_further(nb):
    """(main path, Go further) as lists of cell sources; Sources counts in neither."""
    main, further, seen = [], [], False
    for cell in nb.cells:
        source = cell.source
        if cell.cell_type == "markdown" and "## Go further" in source:
            head, tail = source.split("## Go further", 1)
            main.append(head)
            further.append(tail)
            seen = True
        elif not (cell.cell_type == "markdown" and source.startswith("## Sources")):
            (further if seen else main).append((cell.cell_type, source))
    return main, further


WIDGET_CELL = re.compile(r"^from gpucourse\.\w+_widget import", flags=re.M)


def minutes(cells) -> float:
    """An honest estimate of a learner's time, not a reader's: 180 words a minute; half a
    minute to run and read each code cell; a minute to think before each prediction prompt;
    two more minutes to play with each interactive widget; and a minute to write each Check
    yourself answer before opening it."""
    sources = [c[1] if isinstance(c, tuple) else c for c in cells]
    code = [c[1] for c in cells if isinstance(c, tuple) and c[0] == "code"]
    prose = [
        c[1] if isinstance(c, tuple) else c
        for c in cells
        if not (isinstance(c, tuple) and c[0] == "code")
    ]
    words = sum(len(source.split()) for source in sources)
    predictions = sum(source.count("**Predict") for source in prose)
    widgets = sum(1 for source in code if WIDGET_CELL.search(source))
    answers = sum(source.count("*Your answer:*") for source in prose)
    return words / 180 + len(code) / 2 + predictions + 2 * widgets + answers


def stated_time(nb) -> tuple[int, int]:
    """(main path, Go further) in minutes, as the header states them."""
    found = re.search(
        r'\*\*Time:\*\* about (\d+) minutes, and (\d+) more for "Go further"', nb.cells[0].source
    )
    assert found, 'the header must state **Time:** about N minutes, and M more for "Go further"'
    return int(found[1]), int(found[2])
