"""The committed release: in sync with its source, free of answers, and runnable without nbgrader."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import ChainMap
from pathlib import Path

import nbformat
import pytest
import submissions_gpu_tensors as subs
from nbclient import NotebookClient
from units import UNITS, submissions

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = sorted(
    path.name for path in (ROOT / "source").iterdir() if (path / f"{path.name}.ipynb").is_file()
)
MARKERS = (
    "BEGIN SOLUTION",
    "END SOLUTION",
    "BEGIN HIDDEN TESTS",
    "END HIDDEN TESTS",
    "BEGIN MARK SCHEME",
)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _files(folder: Path) -> dict[str, object]:
    """Relative path -> content; notebooks parsed, so JSON layout and key order do not count."""
    return {
        str(path.relative_to(folder)): json.loads(path.read_text())
        if path.suffix == ".ipynb"
        else path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_every_source_folder_is_a_unit_of_the_course():
    assert SOURCE_FOLDERS == sorted(UNITS), (
        "list each unit in [tool.gpucourse] units (pyproject.toml)"
    )


@pytest.mark.parametrize("unit", SOURCE_FOLDERS)
def test_release_is_what_nbgrader_generates_from_source(tmp_path, unit):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copytree(ROOT / "source" / unit, tmp_path / "source" / unit)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", unit, "--force", "--no-db"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert _files(ROOT / "release" / unit) == _files(tmp_path / "release" / unit), (
        f"release/{unit}/ is out of date: run scripts/generate-release and commit the result"
    )


# ---------------------------------------------------------------- every unit's release
@pytest.fixture(params=UNITS)
def unit(request):
    """The unit's submissions module, with its release and source notebooks read."""
    module = submissions(request.param)
    return module, _read(module.RELEASE), _read(module.SOURCE)


# The lines that wrap every test cell's body (the checks' `_run_test`), hidden or not.
WRAPPER = ("@_run_test", "def _test():")


def _region_lines(source: str, begin: str, end: str) -> list[str]:
    """Lines between `### BEGIN x` and `### END x`, stripped, that say something specific."""
    lines, inside = [], False
    for line in source.splitlines():
        if line.strip() == f"### {begin}":
            inside = True
        elif line.strip() == f"### {end}":
            inside = False
        elif inside and len(line.strip()) >= 12 and line.strip() not in WRAPPER:
            lines.append(line.strip())
    return lines


def _secret_lines(source_nb) -> list[str]:
    lines = []
    for cell in source_nb.cells:
        lines += _region_lines(cell.source, "BEGIN SOLUTION", "END SOLUTION")
        lines += _region_lines(cell.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
    return lines


def test_release_has_no_solution_hidden_test_or_answer(unit):
    subs, release, source = unit
    text = "\n".join(cell.source for cell in release.cells)
    assert [marker for marker in MARKERS if marker in text] == []
    secrets = _secret_lines(source)
    assert len(secrets) > 40, "the source lost its solutions or hidden tests"
    assert [line for line in secrets if line in text] == []
    assert subs.answer_values_in(text) == []
    assert all(not cell.get("outputs") for cell in release.cells if cell.cell_type == "code")


def test_release_keeps_every_graded_cell_with_its_points(unit):
    subs, release, source = unit

    def graded(nb):
        return {
            _meta(c)["grade_id"]: _meta(c).get("points") for c in nb.cells if _meta(c).get("grade")
        }

    assert graded(release) == graded(source) == subs.POINTS
    answers = {_meta(c)["grade_id"] for c in release.cells if _meta(c).get("solution")}
    assert answers == set(subs.SOLUTIONS)


def test_notebook_states_its_total_and_each_test_cell_its_points(unit):
    subs, release, _ = unit
    stated_total = re.search(
        r"worth (\d+) points in all", " ".join(release.cells[0].source.split())
    )
    assert stated_total and float(stated_total.group(1)) == subs.TOTAL
    for cell in release.cells:
        if _meta(cell).get("grade"):
            first_line = cell.source.splitlines()[0]
            stated = re.search(r"(\d+) points?\b", first_line)
            assert stated and float(stated.group(1)) == _meta(cell)["points"], first_line
    for cell in release.cells:  # each question's heading states its share of the total
        heading = re.match(r"## Question (\d+): .*\((\d+) points\)", cell.source)
        if heading:
            number = heading.group(1)
            share = sum(
                points
                for grade_id, points in subs.POINTS.items()
                if grade_id.startswith(f"test_q{number}_")
            )
            assert float(heading.group(2)) == share, cell.source.splitlines()[0]


# ---------------------------------------------------------------- running it without nbgrader
@pytest.fixture()
def no_nbgrader(tmp_path, monkeypatch):
    """Kernels started from now on cannot import nbgrader, as on Colab."""
    blocker = tmp_path / "blocker" / "nbgrader"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        'raise ModuleNotFoundError("nbgrader is not installed here, as on Colab")\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(blocker.parent))


def _execute(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Runs `nb` as a learner would (every cell, errors allowed); cell id -> error name."""
    nb.cells.append(nbformat.v4.new_code_cell("import nbgrader", id="probe-nbgrader"))
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    return {
        cell.id: output.ename
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    }


def _visible_tests(nb) -> list:
    """Graded cells that run a visible test in the release (not only a comment)."""
    return [
        c
        for c in nb.cells
        if _meta(c).get("grade")
        and any(
            line.strip() and not line.lstrip().startswith("#") for line in c.source.splitlines()
        )
    ]


def test_release_runs_without_nbgrader_and_every_answer_raises_not_implemented(unit, no_nbgrader):
    subs, _, _ = unit
    nb = _read(subs.RELEASE)
    errors = _execute(nb)
    assert errors.pop("probe-nbgrader") == "ModuleNotFoundError", (
        "the kernel could still import nbgrader"
    )

    cells = nb.cells
    for index, cell in enumerate(cells):
        if not _meta(cell).get("solution"):
            continue
        if "def " in cell.source:
            # A function stub runs; calling it in the visible test that follows raises.
            test = next(c for c in cells[index + 1 :] if _meta(c).get("grade"))
            assert errors.get(test.id) == "NotImplementedError", (cell.id, errors.get(test.id))
        else:
            assert errors.get(cell.id) == "NotImplementedError", (cell.id, errors.get(cell.id))
    # Every visible test ran: it fails on the stub, never on a missing import or a crash of its own.
    visible = _visible_tests(nb)
    assert len(visible) >= len(subs.SOLUTIONS)  # at least one visible test per answer
    crashed = {
        cell.id: errors.get(cell.id)
        for cell in visible
        if errors.get(cell.id) not in {"NotImplementedError", "CheckFailed"}
    }
    assert crashed == {}
    # The set-up and checks cells, neither answer nor test, run cleanly.
    other = {
        cell.id for cell in cells if not (_meta(cell).get("grade") or _meta(cell).get("solution"))
    }
    assert {cid: name for cid, name in errors.items() if cid in other} == {}


def test_release_with_solutions_passes_every_visible_test_without_nbgrader(unit, no_nbgrader):
    """The solutions, run as written, but with every public name the checks and tests use
    (numbers, math, np, torch, check, sum, model...) given the learner's own value first:
    every visible test still passes, and no test cell replaces one of the learner's names
    (each answer cell of that submission fails if one did)."""
    subs, _, _ = unit
    errors = _execute(
        subs.make_submission(subs.RELEASE, subs.FULL_MARKS["rebinds_every_public_name"])
    )
    assert errors == {"probe-nbgrader": "ModuleNotFoundError"}


def test_visible_tests_fail_with_a_message_on_implausible_answers(unit, no_nbgrader):
    subs, _, _ = unit
    assert set(subs.IMPLAUSIBLE) == set(subs.SOLUTIONS)
    nb = subs.make_submission(subs.RELEASE, subs.IMPLAUSIBLE)
    errors = _execute(nb)
    assert {cell.id: errors.get(cell.id) for cell in _visible_tests(nb)} == {
        cell.id: "CheckFailed" for cell in _visible_tests(nb)
    }
    # Each message names what the answer is, never the checks' own placeholder for a value
    # they could not read (attack 76: "..., not a object" for a tensor pair).
    said = [o.evalue for c in _visible_tests(nb) for o in c.outputs if o.output_type == "error"]
    assert [message for message in said if "a object" in message] == []


@pytest.mark.gpu
def test_solutions_pass_every_hidden_test_on_cuda(unit):
    """Where there is a GPU, the hidden device tests also use models on cuda."""
    subs, _, _ = unit
    nb = _read(subs.SOURCE)
    nb.cells.append(nbformat.v4.new_code_cell("assert torch.cuda.is_available()", id="probe-cuda"))
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    errors = {
        cell.id: output.get("evalue")
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    }
    assert errors == {}


# ---------------------------------------------------------------- the checks, one by one
def checks_of(subs) -> ChainMap:
    """The locked checks cell of a unit's source, run on its own: the helpers its tests call,
    read from the checks' own namespace; what a test puts in it (an answer such as
    `prepare_batch`) goes into the notebook's namespace, where `answer` and `call` read it."""
    (cell,) = [c for c in _read(subs.SOURCE).cells if _meta(c).get("grade_id") == "checks"]
    notebook = {"__name__": "__main__"}
    exec(compile(cell.source, "checks", "exec"), notebook)
    return ChainMap(notebook, notebook["_checks"])


@pytest.fixture(scope="module")
def checks():
    """gpu_tensors' checks."""
    return checks_of(subs)


LIES = """
def __eq__(self, other): return True
def __ne__(self, other): return False
__lt__ = __le__ = __gt__ = __ge__ = __eq__
def __hash__(self): return 0
"""


def _lying(base):
    namespace = {}
    exec(LIES, namespace)
    methods = {k: v for k, v in namespace.items() if not k.startswith("__builtins")}
    extra = {"strip": lambda self, *a: self, "upper": lambda self: self} if base is str else {}
    return type(f"Lying{base.__name__.title()}", (base,), {**methods, **extra})


def _fails(checks, function, *args, **kwargs) -> str:
    with pytest.raises(checks["CheckFailed"]) as failure:
        function(*args, **kwargs)
    return str(failure.value)


def test_an_answer_is_read_through_its_plain_type(checks):
    """A float, int, str or tuple subclass whose comparisons all lie is judged on what it
    holds, and so is an object whose __eq__ says yes to everything."""
    import torch

    lying_float, lying_int, lying_str, lying_tuple = map(_lying, (float, int, str, tuple))
    anything = _lying(object)()
    check_equal, check_close, check_number = (
        checks[n] for n in ("check_equal", "check_close", "check_number")
    )
    for got in (lying_int(), lying_float(), anything, lying_tuple((lying_int(), lying_int()))):
        _fails(checks, check_equal, "x", got, 96)
    _fails(checks, check_equal, "pair", lying_tuple((lying_int(), lying_int())), (96, 83))
    _fails(checks, check_equal, "winner", lying_str(), "GPU")
    _fails(checks, check_equal, "dtype", anything, torch.float64)
    _fails(checks, check_equal, "steps", anything, None)
    _fails(checks, check_close, "q2_mb", lying_float(), 0.786432, figures=2)
    # A visible range check compares the plain value, not the liar's own < and >.
    _fails(checks, check_number, "q2_mb", lying_float(), 0.001, 1000, "MB")
    assert "should be a string" in _fails(checks, checks["plain_text"], "verdict", anything)
    # The same values, honest, pass: what the conversion keeps is the value.
    check_equal("x", lying_int(96), 96)
    check_equal("pair", lying_tuple((96, 83)), (96, 83))
    check_equal("winner", lying_str("GPU"), "GPU")
    check_close("q2_mb", lying_float(0.786432), 0.786432, figures=2)
    assert checks["plain_text"]("verdict", lying_str(" CPU")) == " CPU"


def test_a_tensor_is_read_as_a_plain_tensor_the_check_makes(checks):
    import torch

    class LyingTensor(torch.Tensor):
        exec(LIES)
        device = dtype = shape = property(lambda self: "anything")

    liar = torch.zeros(4, 3, dtype=torch.float64).as_subclass(LyingTensor)
    plain = checks["plain_tensor"]("prepare_batch(...)", liar)
    assert type(plain) is torch.Tensor
    assert (plain.shape, plain.dtype, plain.device.type) == ((4, 3), torch.float64, "cpu")
    assert "should be a tensor" in _fails(checks, checks["plain_tensor"], "result", [[0.0]])


def test_precision_two_significant_figures_stated_and_checked(checks):
    figures = checks["significant_figures"]
    inf = float("inf")  # a whole number may be exact: the hidden tests judge it
    assert [figures(v) for v in (0.79, 0.5, 1, 1.0, 0.786432, 786432, 12.0, 0.48, 0.976)] == [
        2,
        1,
        inf,
        inf,
        6,
        inf,
        inf,
        2,
        3,
    ]
    check_number, check_close = checks["check_number"], checks["check_close"]
    # The visible test refuses an answer rounded further than asked, and says why.
    for value in (0.5, 0.3, 0.8):
        message = _fails(checks, check_number, "copy_ms", value, 1e-7, 1e6, "ms", figures=2)
        assert "1 significant figure" in message and "at least 2" in message
    check_number("q2_mb", 0.79, 0.001, 1000, "MB", figures=2)
    # The hidden test accepts what two correct figures give, and no less.
    check_close("q2_mb", 0.79, 0.786432, figures=2)
    check_close("gpu_route_ms", 0.98, 0.976, figures=2)
    check_close("copy_ms", 0.48, 0.48, figures=2)
    message = _fails(checks, check_close, "q2_mb", 0.78, 0.786432, figures=2)
    assert "precision" in message and "0.786" not in message and "0.79" not in message


@pytest.mark.parametrize("unit_name", UNITS)
def test_precision_a_value_to_three_figures_rounds_to_the_same_three(unit_name):
    """Review 60: the hidden check took any value within half a unit of the third figure of
    the exact value, so 154.6 for 154.14 MB (155 to 3 figures), 38.58 for 38.535 and 24.07
    for 24.032 % earned full marks in units 3 and 4. Review 62: a value worked out by Python
    from inputs the learner rounded correctly (38.54 / 25 for 1.5414, the table's 150.5 /
    626.0 for 24.032 %) is right to 3 figures, though not at every figure it carries. A value
    is right to 3 figures when it is within half a unit of the third and rounds to the same
    three (either way at a tie); float32 and float16 values too."""
    import numpy as np

    checks = checks_of(submissions(unit_name))
    check_close = checks["check_close"]
    right = [
        (154, 154.14),
        (154.1, 154.14),
        (154.2, 154.14),  # its fourth figure is off; to 3 figures it is 154
        (154.14, 154.14),
        (38.5, 38.535),
        (38.54, 38.535),
        (38.53, 38.535),  # a tie: either way is correct rounding
        (24.0, 24.032),
        (100 * 150.5 / 626.0, 100 * 150.452 / 626.037),
        (38.54 / 25, 38.535168 / 25),
        (53.3, 160 / 3),
        (53.33, 160 / 3),
        (float(np.float32(53.3)), 160 / 3),
        (float(np.float16(160 / 3)), 160 / 3),
        (float(np.float32(160 / 3)), 160 / 3),
        (160 / 3 * (1 + 3e-7), 160 / 3),  # exact but for the last bits of the arithmetic
        (8.33, 25 / 3),
        (150, 150.4),
        (400.4, 400),
        (38.55, 38.5512),  # 38.55 is a tie at 3 figures: 38.6 is one of its roundings
    ]
    for value, exact in right:
        check_close("x", value, exact, figures=3)
    wrong = [(154.6, 154.14), (155, 154.14), (38.58, 38.535), (24.07, 24.032), (53.38, 160 / 3)]
    wrong += [(6.164, 6.1656), (8.3, 25 / 3), (2.7145, 2.71828)]
    for value, exact in wrong:
        message = _fails(checks, check_close, "x", value, exact, figures=3)
        assert "not to the precision asked" in message and "rounded correctly" in message


def test_bytes_instead_of_megabytes_gets_its_own_hint(checks):
    message = _fails(checks, checks["check_number"], "q2_mb", 786432, 0.001, 1000, "MB")
    assert "number of bytes" in message


@pytest.mark.parametrize(
    "error",
    [
        AssertionError("Torch not compiled with CUDA enabled"),
        RuntimeError("No CUDA GPUs are available"),
    ],
)
def test_a_function_that_asks_for_a_missing_gpu_gets_a_clear_message(checks, error):
    def prepare_batch(batch, model):
        raise error

    checks["prepare_batch"] = prepare_batch
    message = _fails(checks, checks["call"], "prepare_batch", None, None)
    assert "this computer has none" in message and "next(model.parameters()).device" in message
    assert "Traceback" not in message


def test_a_stub_still_raises_not_implemented_through_call(checks):
    def size_mb(shape, dtype):
        raise NotImplementedError()

    checks["size_mb"] = size_mb
    with pytest.raises(NotImplementedError):
        checks["call"]("size_mb", (1,), None)


def test_release_with_a_hardcoded_cuda_device_fails_its_visible_test_clearly(
    unit, no_nbgrader, monkeypatch
):
    subs, release, _ = unit
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # as on a machine without a GPU
    mistake = subs.MISTAKES["hardcodes_cuda"]
    visible = {c.metadata.nbgrader.grade_id for c in _visible_tests(release)}
    (failing,) = [grade_id for grade_id in mistake.fails if grade_id in visible]
    nb = subs.make_submission(subs.RELEASE, mistake.answers)
    nb.cells.append(nbformat.v4.new_code_cell("import nbgrader", id="probe-nbgrader"))
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    (test,) = [c for c in nb.cells if _meta(c).get("grade_id") == failing]
    (error,) = [o for o in test.outputs if o.output_type == "error"]
    assert error.ename == "CheckFailed" and "this computer has none" in error.evalue
    assert error.traceback == [f"CheckFailed: {error.evalue}"]  # one message, no traceback


# ---------------------------------------------------------------- gpu_training's checks
@pytest.fixture(scope="module")
def training_checks():
    return checks_of(submissions("gpu_training"))


@pytest.mark.parametrize("unit_name", ["gpu_training", "gpu_data_loading"])
def test_precision_a_whole_number_is_exact_and_an_int_gets_a_note(unit_name, capsys):
    """Issue 18: 53 for 53.3 % and 39 for 38.5 MB passed the visible test silently; then a
    fresh review's right answers, exact ints that Python made (max(12 / 2, 2, 8) is the
    int 8), lost the visible test's point. A whole number, int or float, passes the visible
    test (the hidden tests, which know the value, refuse a rounded one); an int with fewer
    digits than asked gets a note that says so. The visible check knows no expected value,
    so its verdict cannot give away whether the answer is whole."""
    import numpy as np

    checks = checks_of(submissions(unit_name))
    check_number = checks["check_number"]
    for value in (400.0, 3e2, 15.0, np.float64(8.0), 53.3, 38.5, 381.4697265625, 12.5, 154, 1234):
        check_number("x", value, 0.01, 100_000, "ms", figures=3)
    assert "Note" not in capsys.readouterr().out
    for value in (53, 39, 400, 15, 8, np.int64(53)):
        check_number("x", value, 0.01, 100_000, "ms", figures=3)
        note = capsys.readouterr().out
        assert f"x = {int(value)!r} is a whole number: right if it is exact" in note
        assert "at least 3 significant figures" in note
    for value, shows in ((0.45, 2), (3.5, 2)):
        message = _fails(checks, check_number, "x", value, 0.01, 100_000, "ms", figures=3)
        assert f"shows {shows} significant figure" in message and "at least 3" in message


def test_training_precision_whole_megabytes_are_exact_and_others_need_three_figures(
    training_checks,
):
    check_number = training_checks["check_number"]
    for value in (400.0, 381.4697265625, 12.5):
        check_number("adam_mb", value, 1, 100_000, "MB", figures=3)
    for value, shows in ((0.45, 2), (3.5, 2), (12.25e1 / 10, 3)):
        if shows < 3:
            message = _fails(
                training_checks, check_number, "adam_mb", value, 0.01, 100_000, "MB", figures=3
            )
            assert f"shows {shows} significant figures" in message and "at least 3" in message
    assert "looks like a number of bytes" in _fails(
        training_checks, check_number, "adam_mb", 400_000_000, 1, 100_000, "MB", figures=3
    )
    assert "should be a whole number of waits" in _fails(
        training_checks, check_number, "waits", 10.5, 0, 1_000_000, "waits", whole=True
    )


def test_training_hints_recognise_a_rounded_wrong_value(training_checks):
    check_close = training_checks["check_close"]
    mib = 400 * 10**6 / 2**20
    hints = [(mib, "that is in MiB")]
    for typed in (381.47, 381, 381.5, 380):  # within 1% of the MiB figure, however rounded
        assert "that is in MiB" in _fails(
            training_checks, check_close, "adam_mb", typed, 400, figures=3, hints=hints
        )
    check_close("adam_mb", 400.4, 400, figures=3, hints=hints)
    message = _fails(training_checks, check_close, "adam_mb", 350, 400, figures=3, hints=hints)
    assert message == "adam_mb = 350.0: that is not right yet."


@pytest.mark.parametrize(
    "error, says",
    [
        (
            RuntimeError("Tensor on device meta is not on the expected device cpu!"),
            "move the batch",
        ),
        # The device-mismatch error's stable beginning, whatever follows it in a PyTorch release.
        (
            RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                "cuda:0 and cpu!"
            ),
            "move the batch",
        ),
        (
            RuntimeError(
                "Expected all tensors to be on the same device, but got mat1 is on cpu, different "
                "from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)"
            ),
            "move the batch",
        ),
        (RuntimeError("expected target dtype to be Long or Byte, but got Double"), "must be int64"),
        (
            RuntimeError("Tensor.item() cannot be called on meta tensors"),
            "read a tensor's value on the host",
        ),
        (
            NotImplementedError("Cannot copy out of meta tensor; no data!"),
            "read a tensor's value on the host",
        ),
        (
            RuntimeError(
                "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() "
                "is False."
            ),
            "map_location",
        ),
        (AssertionError("Torch not compiled with CUDA enabled"), "this computer has none"),
        (ValueError("something else"), "raised ValueError: something else"),
    ],
)
def test_training_call_turns_known_errors_into_hints(training_checks, error, says):
    def train_step(*args):
        raise error

    training_checks["train_step"] = train_step
    message = _fails(training_checks, training_checks["call"], "train_step", None)
    assert says in message and "Traceback" not in message


def test_training_call_lets_a_stub_raise_and_silences_warnings(training_checks):
    import warnings

    def stub(*args):
        raise NotImplementedError()

    def warns(*args):
        warnings.warn("copying from a non-meta parameter is a no-op", stacklevel=2)
        return 1.0

    training_checks.update(stub=stub, warns=warns)
    with pytest.raises(NotImplementedError):
        training_checks["call"]("stub")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would fail here: call() must silence it
        assert training_checks["call"]("warns") == 1.0


def test_training_a_float_loss_is_refused_with_the_wait_named(training_checks):
    message = _fails(training_checks, training_checks["plain_tensor"], "train_step(...)", 0.25)
    assert "should be a tensor, not a float" in message and "makes the CPU wait" in message


def test_training_checks_make_a_checkpoint_as_a_gpu_saves_it(training_checks):
    import torch

    asked = []
    model = training_checks["small_model"]("cpu", seed=9)
    state = torch.load(
        training_checks["saved_on_gpu"](model),
        map_location=lambda storage, location: asked.append(location) or storage,
    )
    assert set(asked) == {"cuda:0"}
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
