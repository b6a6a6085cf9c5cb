"""The committed release: in sync with its source, free of answers, and runnable without nbgrader."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import submissions as subs

ROOT = Path(__file__).resolve().parents[1]
UNITS = sorted(path.name for path in (ROOT / "source").iterdir() if (path / f"{path.name}.ipynb").is_file())
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN MARK SCHEME")


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _files(folder: Path) -> dict[str, object]:
    """Relative path -> content; notebooks parsed, so JSON layout and key order do not count."""
    return {
        str(path.relative_to(folder)): json.loads(path.read_text()) if path.suffix == ".ipynb" else path.read_bytes()
        for path in sorted(folder.rglob("*")) if path.is_file()
    }


@pytest.mark.parametrize("unit", UNITS)
def test_release_is_what_nbgrader_generates_from_source(tmp_path, unit):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copytree(ROOT / "source" / unit, tmp_path / "source" / unit)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", unit, "--force", "--no-db"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert _files(ROOT / "release" / unit) == _files(tmp_path / "release" / unit), (
        f"release/{unit}/ is out of date: run scripts/generate-release and commit the result"
    )


# ---------------------------------------------------------------- gpu_tensors in detail
RELEASE = _read(subs.RELEASE)
SOURCE = _read(subs.SOURCE)


def _region_lines(source: str, begin: str, end: str) -> list[str]:
    """Lines between `### BEGIN x` and `### END x`, stripped, that say something specific."""
    lines, inside = [], False
    for line in source.splitlines():
        if line.strip() == f"### {begin}":
            inside = True
        elif line.strip() == f"### {end}":
            inside = False
        elif inside and len(line.strip()) >= 12:
            lines.append(line.strip())
    return lines


def _secret_lines() -> list[str]:
    lines = []
    for cell in SOURCE.cells:
        lines += _region_lines(cell.source, "BEGIN SOLUTION", "END SOLUTION")
        lines += _region_lines(cell.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
    return lines


def test_release_has_no_solution_hidden_test_or_answer():
    text = "\n".join(cell.source for cell in RELEASE.cells)
    assert [marker for marker in MARKERS if marker in text] == []
    secrets = _secret_lines()
    assert len(secrets) > 40, "the source lost its solutions or hidden tests"
    assert [line for line in secrets if line in text] == []
    assert subs.answer_values_in(text) == []
    assert all(not cell.get("outputs") for cell in RELEASE.cells if cell.cell_type == "code")


def test_release_keeps_every_graded_cell_with_its_points():
    def graded(nb):
        return {_meta(c)["grade_id"]: _meta(c).get("points") for c in nb.cells if _meta(c).get("grade")}
    assert graded(RELEASE) == graded(SOURCE) == subs.POINTS
    answers = {_meta(c)["grade_id"] for c in RELEASE.cells if _meta(c).get("solution")}
    assert answers == set(subs.SOLUTIONS)


def test_notebook_states_its_total_and_each_test_cell_its_points():
    stated_total = re.search(r"worth (\d+) points in all", RELEASE.cells[0].source)
    assert stated_total and float(stated_total.group(1)) == subs.TOTAL
    for cell in RELEASE.cells:
        if _meta(cell).get("grade"):
            first_line = cell.source.splitlines()[0]
            stated = re.search(r"(\d+) points?\b", first_line)
            assert stated and float(stated.group(1)) == _meta(cell)["points"], first_line


# ---------------------------------------------------------------- running it without nbgrader
@pytest.fixture()
def no_nbgrader(tmp_path, monkeypatch):
    """Kernels started from now on cannot import nbgrader, as on Colab."""
    blocker = tmp_path / "blocker" / "nbgrader"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ModuleNotFoundError("nbgrader is not installed here, as on Colab")\n')
    monkeypatch.setenv("PYTHONPATH", str(blocker.parent))


def _execute(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Runs `nb` as a learner would (every cell, errors allowed); cell id -> error name."""
    nb.cells.append(nbformat.v4.new_code_cell("import nbgrader", id="probe-nbgrader"))
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    return {
        cell.id: output.ename
        for cell in nb.cells if cell.cell_type == "code"
        for output in cell.outputs if output.output_type == "error"
    }


def _visible_tests(nb) -> list:
    """Graded cells that run a visible test in the release (not only a comment)."""
    return [c for c in nb.cells if _meta(c).get("grade")
            and any(line.strip() and not line.lstrip().startswith("#") for line in c.source.splitlines())]


def test_release_runs_without_nbgrader_and_every_answer_raises_not_implemented(no_nbgrader):
    nb = _read(subs.RELEASE)
    errors = _execute(nb)
    assert errors.pop("probe-nbgrader") == "ModuleNotFoundError", "the kernel could still import nbgrader"

    cells = nb.cells
    for index, cell in enumerate(cells):
        if not _meta(cell).get("solution"):
            continue
        if "def " in cell.source:
            # A function stub runs; calling it in the visible test that follows raises.
            test = next(c for c in cells[index + 1:] if _meta(c).get("grade"))
            assert errors.get(test.id) == "NotImplementedError", (cell.id, errors.get(test.id))
        else:
            assert errors.get(cell.id) == "NotImplementedError", (cell.id, errors.get(cell.id))
    # Every visible test ran: it fails on the stub, never on a missing import or a crash of its own.
    visible = _visible_tests(nb)
    assert len(visible) >= 9
    crashed = {cell.id: errors.get(cell.id) for cell in visible
               if errors.get(cell.id) not in {"NotImplementedError", "CheckFailed"}}
    assert crashed == {}
    # The set-up and checks cells, neither answer nor test, run cleanly.
    other = {cell.id for cell in cells if not (_meta(cell).get("grade") or _meta(cell).get("solution"))}
    assert {cid: name for cid, name in errors.items() if cid in other} == {}


def test_release_with_solutions_passes_every_visible_test_without_nbgrader(no_nbgrader):
    errors = _execute(subs.make_submission(subs.RELEASE, subs.SOLUTIONS))
    assert errors == {"probe-nbgrader": "ModuleNotFoundError"}


IMPLAUSIBLE = {
    "q1_prepare_batch": "def prepare_batch(batch, model):\n    return batch.numpy()",
    "q1_second_problem": "second_problem = 'float64'",
    "q2_mb": "q2_mb = '0.8 MB'",
    "q2_size_mb": "def size_mb(shape, dtype):\n    return 4",
    "q3_ticks": "cpu_ticks_3, gpu_ticks_3, winner_3 = 90.5, 80.5, 'gpu'\ncpu_ticks_2 = gpu_ticks_2 = 0",
    "q3_race_ticks": "def race_ticks(steps, *args, **kwargs):\n    return [steps, steps]",
    "q3_fewest_gpu_steps": "def fewest_gpu_steps(*args, **kwargs):\n    return 2.5",
    "q4_dtypes": "x_dtype, y_dtype = 'float64', 'float32'",
    "q4_worked_example": "copy_ms = gpu_route_ms = -1\nverdict = 'the CPU'",
}


def test_visible_tests_fail_with_a_message_on_implausible_answers(no_nbgrader):
    assert set(IMPLAUSIBLE) == set(subs.SOLUTIONS)
    nb = subs.make_submission(subs.RELEASE, IMPLAUSIBLE)
    errors = _execute(nb)
    assert {cell.id: errors.get(cell.id) for cell in _visible_tests(nb)} == {
        cell.id: "CheckFailed" for cell in _visible_tests(nb)
    }


@pytest.mark.gpu
def test_solutions_pass_every_hidden_test_on_cuda():
    """Where there is a GPU, the hidden device test also moves a batch to a model on cuda."""
    nb = _read(subs.SOURCE)
    nb.cells.append(nbformat.v4.new_code_cell("assert torch.cuda.is_available()", id="probe-cuda"))
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    errors = {cell.id: output.get("evalue") for cell in nb.cells if cell.cell_type == "code"
              for output in cell.outputs if output.output_type == "error"}
    assert errors == {}
