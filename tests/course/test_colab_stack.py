"""Colab: the notebooks ask for a GPU, install the course without touching Colab's
packages, and run on Colab's stack.

Colab's stack here is a venv (cached in `.venv-colab/`, rebuilt when COLAB_PINS
change) with the versions Colab ships: ipywidgets 7.7.1 (not 8), IPython 7.34 and
ipykernel 6.17, no nbgrader. This machine's CPU build of torch stands in for Colab's
CUDA build. The course package comes from a wheel built from the repository, as
the set-up cell's `pip install` gives it on Colab, never from the source tree.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import nbformat
import pytest
from course_package import copy_package, pip, run
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from units import UNITS

COLAB_PINS = [
    "ipywidgets==7.7.1",
    "ipykernel==6.17.1",
    "ipython==7.34.0",
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "torch==2.13.0",  # the CPU build on these machines' disk; never unpinned
]
LESSON = "notebooks/gpu_tensors.ipynb"
LESSONS = [f"notebooks/{unit}.ipynb" for unit in UNITS]
SOURCES = [f"source/{unit}/{unit}.ipynb" for unit in UNITS]
RELEASES = [f"release/{unit}/{unit}.ipynb" for unit in UNITS]
CELL_TIMEOUT = 120
# What a failing visible test may raise while its answer is still the stub.
UNANSWERED = {"NotImplementedError", "NameError", "CheckFailed"}


def read(root: Path, name: str):
    return nbformat.read(root / name, as_version=4)


def first_code_cell(notebook) -> str:
    return next(cell.source for cell in notebook.cells if cell.cell_type == "code")


# -- what Colab reads before it runs anything --------------------------------------------
@pytest.mark.parametrize("name", LESSONS + SOURCES + RELEASES)
def test_notebook_asks_colab_for_a_gpu(root, name):
    metadata = read(root, name).metadata
    assert metadata.get("accelerator") == "GPU"
    assert metadata.get("colab", {}).get("gpuType") == "T4"
    assert metadata.get("colab", {}).get("provenance") == []


# -- the Colab stack ---------------------------------------------------------------------
@pytest.fixture(scope="session")
def colab_python(root) -> Path:
    """The cached Colab-like venv's python, rebuilt only when its pins change."""
    prefix = root / ".venv-colab"
    key = hashlib.sha256("\n".join([sys.version, *COLAB_PINS]).encode()).hexdigest()
    stamp = prefix / ".colab-pins"
    if not (stamp.exists() and stamp.read_text() == key):
        # The stamp is written last, so an interrupted build is rebuilt next time.
        shutil.rmtree(prefix, ignore_errors=True)
        venv.create(prefix, with_pip=False)
        pip(prefix / "bin" / "python", "install", *COLAB_PINS, timeout=1200)
        stamp.write_text(key)
    return prefix / "bin" / "python"


@pytest.fixture(scope="session")
def colab_with_course(root, colab_python, tmp_path_factory) -> Path:
    """Colab's stack plus the course, installed from a freshly built wheel."""
    build = tmp_path_factory.mktemp("wheel")
    package = copy_package(root, build / "package")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            build / "dist",
            package,
        ],
        timeout=300,
    )
    (wheel,) = (build / "dist").glob("gpucourse-*.whl")
    pip(colab_python, "install", "--no-deps", "--force-reinstall", wheel, timeout=300)
    # The wheel's own requirements must accept Colab's versions as they are.
    pip(colab_python, "check", timeout=120)
    return colab_python


def colab_client(notebook, colab_python: Path, folder: Path) -> NotebookClient:
    """An nbclient run of ``notebook`` in a kernel of the Colab venv, in ``folder``."""
    specs = folder / "kernels"
    (specs / "colab").mkdir(parents=True, exist_ok=True)
    (specs / "colab" / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(colab_python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Colab stack",
                "language": "python",
            }
        )
    )
    manager = KernelManager(
        kernel_name="colab", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(specs)])
    )
    return NotebookClient(
        notebook,
        km=manager,
        kernel_name="colab",
        timeout=CELL_TIMEOUT,
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )


def code_cell(source: str):
    return nbformat.v4.new_code_cell(source)


def error_of(cell) -> str | None:
    errors = [out.ename for out in cell.get("outputs", []) if out.output_type == "error"]
    return errors[0] if errors else None


def stdout_of(cell) -> str:
    return "".join(
        out.get("text", "")
        for out in cell.get("outputs", [])
        if out.output_type == "stream" and out.name == "stdout"
    )


ENVIRONMENT_PROBE = """\
import importlib.util, json, ipywidgets, IPython, gpucourse
print(json.dumps({"ipywidgets": ipywidgets.__version__, "ipython": IPython.__version__,
                  "gpucourse": gpucourse.__file__,
                  "nbgrader": importlib.util.find_spec("nbgrader") is not None}))"""

DRIVE_RACE = """\
race.steps.value = 3
race.run.click()
print(race.playing, race.run.disabled)"""

FINISH_RACE = """\
import asyncio
for _ in range(600):  # at most 30 s
    if not race.playing:
        break
    await asyncio.sleep(0.05)
print(race.status_text)
print(race.cpu.value)
print(race.gpu.value)
print(race.run.disabled)"""


def run_lesson_and_drive(root, colab_with_course, tmp_path, lesson: str, *driving: str):
    """Run a lesson top to bottom on Colab's stack, then the driving cells after it; every
    cell must run without an error, on ipywidgets 7.7.1, without nbgrader, from the built
    wheel. The lesson's cells and the driving cells' printed text."""
    notebook = read(root, lesson)
    lesson_cells = len(notebook.cells)
    notebook.cells += [code_cell(ENVIRONMENT_PROBE), *map(code_cell, driving)]
    colab_client(notebook, colab_with_course, tmp_path).execute()

    failed = [(i, error_of(c)) for i, c in enumerate(notebook.cells) if error_of(c)]
    assert not failed, f"lesson cells raised on Colab's stack: {failed}"
    probe, *driven = notebook.cells[lesson_cells:]
    facts = json.loads(stdout_of(probe))
    assert facts["ipywidgets"] == "7.7.1" and facts["ipython"].startswith("7.")
    assert not facts["nbgrader"], "Colab has no nbgrader; the lesson must not need it"
    assert Path(facts["gpucourse"]).is_relative_to(colab_with_course.parents[1]), (
        f"gpucourse came from {facts['gpucourse']}, not from the installed wheel"
    )
    return notebook.cells[:lesson_cells], [stdout_of(c) for c in driven]


@pytest.mark.slow
def test_lesson_runs_on_colabs_stack_and_its_race_plays_from_python(
    root, colab_with_course, tmp_path
):
    cells, (drive, finish) = run_lesson_and_drive(
        root, colab_with_course, tmp_path, LESSON, DRIVE_RACE, FINISH_RACE
    )
    outputs = "".join(stdout_of(c) for c in cells)
    assert "torch.float64 torch.float32\ntorch.Size([2, 3]) cpu\n" in outputs
    assert "[[ 0.  0.  0.]\n [20. 40.  0.]]" in outputs

    # Run starts the race in the background and holds the button until the end.
    assert drive.split() == ["True", "True"]
    result, cpu_lane, gpu_lane, disabled = finish.strip().split("\n")
    assert result == "3 steps: CPU 96 ticks, GPU 83 ticks — the GPU wins."
    assert "CPU" in cpu_lane and "done" in cpu_lane and "96 ticks" in cpu_lane
    assert "GPU" in gpu_lane and "done" in gpu_lane and "83 ticks" in gpu_lane
    assert disabled == "False"


DRIVE_TRAINING = """\
trainer.max_steps = 100_000
trainer.run.click()
print(trainer.playing, trainer.run.disabled, trainer.stop.disabled)"""

FINISH_TRAINING = """\
import asyncio
await asyncio.sleep(0.5)
trainer.read_every.value = 1       # mid-run: a new row of measured speeds
await asyncio.sleep(0.5)
trainer.stop.click()
for _ in range(200):               # at most 10 s
    if not trainer.playing:
        break
    await asyncio.sleep(0.05)
print(trainer.status_text)
print(trainer.speeds.value.count("<tr><td>cpu</td>"), "<polyline" in trainer.curve.value)
print(trainer.run.disabled, trainer.stop.disabled)"""


@pytest.mark.slow
def test_training_lesson_runs_on_colabs_stack_and_its_widget_trains_from_python(
    root, colab_with_course, tmp_path
):
    _, (drive, finish) = run_lesson_and_drive(
        root,
        colab_with_course,
        tmp_path,
        "notebooks/gpu_training.ipynb",
        DRIVE_TRAINING,
        FINISH_TRAINING,
    )
    # Train starts a task and hands the kernel back at once; Stop ends it.
    assert drive.split() == ["True", "True", "False"]
    status, rows, buttons = finish.strip().split("\n")
    assert status.startswith("stopped: step ") and "measured: " in status
    assert rows == "2 True" and buttons == "False True"


DRIVE_TIMELINE = """\
timeline.workers.value = 3
timeline.pinned.value = timeline.side_stream.value = True
timeline.dtype.value = "uint8"
timeline.run.click()
print(timeline.playing, timeline.run.disabled)"""

FINISH_TIMELINE = """\
import asyncio
for _ in range(600):  # at most 30 s
    if not timeline.playing:
        break
    await asyncio.sleep(0.05)
print(timeline.status_text)
print("load, worker 3" in timeline.timeline.value, timeline.run.disabled)"""


@pytest.mark.slow
def test_data_loading_lesson_runs_on_colabs_stack_and_its_timeline_plays_from_python(
    root, colab_with_course, tmp_path
):
    _, (drive, finish) = run_lesson_and_drive(
        root,
        colab_with_course,
        tmp_path,
        "notebooks/gpu_data_loading.ipynb",
        DRIVE_TIMELINE,
        FINISH_TIMELINE,
    )
    # Run plays in the background and holds the button until the last frame.
    assert drive.split() == ["True", "True"]
    result, lanes = finish.strip().split("\n")
    assert (
        result.startswith("8 batches in ")
        and "8 ms a batch in steady state · bottleneck: compute" in result
    )
    assert lanes == "True False"


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
def test_release_runs_on_colabs_stack_with_answers_still_to_write(
    root, colab_with_course, tmp_path, release
):
    notebook = read(root, release)
    colab_client(notebook, colab_with_course, tmp_path).execute()

    stubs, tests = 0, 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        assert cell.get("execution_count"), f"release cell {index} did not run"
        nbgrader = cell.metadata.get("nbgrader", {})
        error = error_of(cell)
        if nbgrader.get("solution"):
            stubs += error == "NotImplementedError"
            assert error in (None, "NotImplementedError"), f"answer cell {index}: {error}"
        elif nbgrader.get("grade"):
            tests += error is not None
            assert error in (None, *UNANSWERED), (
                f"test cell {index} ({nbgrader['grade_id']}) raised {error}, "
                "which an unanswered exercise should not cause"
            )
        else:
            assert error is None, f"release cell {index} raised {error} on Colab's stack"
    assert stubs > 0, "no answer cell raised NotImplementedError: is this the release?"
    assert tests > 0, "no visible test failed on the empty answers: do the tests run?"


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES)
def test_source_solutions_pass_every_test_on_colabs_stack(
    root, colab_with_course, tmp_path, source
):
    notebook = read(root, source)
    colab_client(notebook, colab_with_course, tmp_path).execute()
    failed = [
        (cell.metadata.get("nbgrader", {}).get("grade_id", i), error_of(cell))
        for i, cell in enumerate(notebook.cells)
        if error_of(cell)
    ]
    assert not failed, f"with the solutions, these cells failed on Colab's stack: {failed}"


# -- the set-up cell ---------------------------------------------------------------------
SETUP_CELL_UNDER_TEST = """\
import json, sys, types
from IPython.core.interactiveshell import InteractiveShell

calls = []
shell = InteractiveShell.instance()
shell.register_magic_function(calls.append, "line", "pip")
cell = sys.stdin.read()
result = {}
shell.run_cell(cell).raise_error()
result["installed here"] = list(calls)
sys.modules["gpucourse"] = None  # importlib.util.find_spec now says it is missing
shell.run_cell(cell).raise_error()
result["missing here"] = list(calls)
sys.modules["google.colab"] = types.ModuleType("google.colab")
shell.run_cell(cell).raise_error()
result["missing on Colab"] = list(calls)
print(json.dumps(result))"""


@pytest.mark.slow
@pytest.mark.parametrize("name", LESSONS + RELEASES)
def test_setup_cell_installs_the_course_only_on_colab_and_upgrades_nothing(
    root, name, colab_with_course
):
    cell = first_code_cell(read(root, name))
    done = subprocess.run(
        [colab_with_course, "-c", SETUP_CELL_UNDER_TEST],
        input=cell,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    calls = json.loads(done.stdout.strip().splitlines()[-1])
    assert calls["installed here"] == [] and calls["missing here"] == []
    (install,) = calls["missing on Colab"]
    arguments = shlex.split(install)
    assert arguments[0] == "install" and "--no-deps" in arguments
    assert not {"-U", "--upgrade", "--force-reinstall"} & set(arguments)
    packages = [a for a in arguments[1:] if not a.startswith("-")]
    assert len(packages) == 1 and packages[0].startswith("gpucourse @ git+https://github.com/"), (
        f"the set-up cell should install the course package alone, got: {install}"
    )
