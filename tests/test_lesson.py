"""The lesson notebook: executed top to bottom on the CPU, and as committed."""
import re

import nbclient
import nbformat
import pytest

SETUP_CELL = '''# Set-up. On Colab this installs the course's helper package, without touching
# Colab's own torch or ipywidgets; everywhere else it is already installed.
import importlib.util, sys
if importlib.util.find_spec("gpucourse") is None and "google.colab" in sys.modules:
    %pip install --quiet --no-deps "gpucourse @ git+https://github.com/gpu-course/pytorch-tensors-on-the-gpu"'''


@pytest.fixture(scope="module")
def lesson_path(root):
    return root / "notebooks" / "gpu_tensors.ipynb"


@pytest.fixture(scope="module")
def committed(lesson_path):
    return nbformat.read(lesson_path, as_version=4)


@pytest.fixture(scope="module")
def executed(lesson_path):
    nb = nbformat.read(lesson_path, as_version=4)
    # Hide any GPU so the CPU lesson is tested the same way everywhere.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")
        nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                resources={"metadata": {"path": str(lesson_path.parent)}}).execute()
    return nb


def cell_with(nb, snippet):
    matches = [c for c in nb.cells if c.cell_type == "code" and snippet in c.source]
    assert len(matches) == 1, f"expected one code cell containing {snippet!r}"
    return matches[0]


def printed(cell):
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def test_no_cell_errors(executed):
    errors = [(c.source[:60], o.ename, o.evalue) for c in executed.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert errors == []


def test_tensor_py_prints_the_seeds_lines(executed):
    assert printed(cell_with(executed, "x = torch.from_numpy(a)")) == (
        "torch.float64 torch.float32\n"
        "torch.Size([2, 3]) cpu\n")
    assert printed(cell_with(executed, "z = x * 10")) == (
        "cpu\n"
        "[[ 0.  0.  0.]\n"
        " [20. 40.  0.]]\n")


def test_torch_tensor_of_float64_numpy_stays_float64(executed):
    assert printed(cell_with(executed, "print(torch.tensor(a).dtype)")) == (
        "torch.float64\ntorch.float32\n")


def test_size_py_prints_the_seeds_lines(executed):
    assert printed(cell_with(executed, "clouds = torch.zeros(8, 2048, 3)")) == (
        "torch.Size([8, 2048, 3]) torch.float32\n"
        "49152 numbers of 4 bytes each\n"
        "0.196608 MB\n")


def test_device_error_cell_prints_the_error_and_the_fix_works(executed):
    message = printed(cell_with(executed, "x_far + y_cpu\nexcept RuntimeError"))
    assert message.startswith("RuntimeError: ") and "device" in message
    assert printed(cell_with(executed, "total = x_far + y_cpu.to(far)")) == "meta\n"


def test_worked_example_arithmetic_matches_the_text(executed):
    out = printed(cell_with(executed, "size_bytes = 1_000_000 * 3 * 4"))
    for line in ["1. size: 12 MB", "2. copy to the GPU: 0.48 ms", "3. work on the GPU: 0.016 ms",
                 "GPU route: 0.98 ms against the CPU's 0.4 ms"]:
        assert line in out


def test_measurements_print_units_and_a_computed_verdict(executed):
    out = printed(cell_with(executed, "times = measure_step(device)"))
    one = float(re.search(r"CPU step, 1 thread: ([\d.]+) ms", out).group(1))
    assert one > 0 and re.search(r"CPU step, \d+ threads: [\d.]+ ms", out)
    verdict = printed(cell_with(executed, "print(times.verdict())"))
    assert f"CPU route: {one:.3f} ms on 1 thread" in verdict
    assert re.search(r"Verdict: for one step the (GPU route|CPU) is faster here", verdict)
    assert "assumed: 25 GB/s link" in verdict
    assert "one core" in verdict.lower()


def test_race_cell_shows_the_live_widget_and_a_fallback(executed):
    (output,) = cell_with(executed, "race = RaceWidget(").outputs
    assert "application/vnd.jupyter.widget-view+json" in output.data
    assert "<table" in output.data["text/html"]


def test_background_timing_runs_on_cpu_and_explains(executed):
    out = printed(cell_with(executed, "timing = background_timing(device)"))
    assert "time without synchronize():" in out and "No GPU here" in out


def test_committed_notebook_keeps_only_the_deliberate_outputs(committed):
    with_outputs = [c.source.splitlines()[-1] for c in committed.cells
                    if c.cell_type == "code" and c.outputs]
    assert with_outputs == ["SVG(two_processors_svg())", "race"]
    assert all(c.execution_count is None for c in committed.cells if c.cell_type == "code")
    assert "widgets" not in committed.metadata  # no widget state: the HTML fallback stands in


def test_committed_fallbacks_read_without_a_kernel(committed):
    figure = cell_with(committed, "SVG(two_processors_svg())").outputs[0].data
    assert "copy: slow" in figure["image/svg+xml"]
    race = cell_with(committed, "race = RaceWidget(").outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" not in race
    assert "<td>3</td><td>96 ticks</td><td>83 ticks</td>" in race["text/html"]


def test_first_code_cell_is_the_colab_set_up_cell_and_colab_offers_a_gpu(committed):
    first = next(c for c in committed.cells if c.cell_type == "code")
    assert first.source == SETUP_CELL
    assert committed.metadata["accelerator"] == "GPU"
    assert committed.metadata["colab"] == {"provenance": [], "gpuType": "T4"}


def test_predictions_are_asked_before_their_outputs(committed):
    sources = [c.source for c in committed.cells]

    def index(snippet):
        return next(i for i, s in enumerate(sources) if snippet in s)

    assert index("write down the two dtypes") < index("x = torch.from_numpy(a)")
    assert index("Predict, press Run") < index("race = RaceWidget(")
    assert index("**Predict first:** how many megabytes") < index("clouds = torch.zeros")


def test_seed_sections_appear_in_order(committed):
    text = "\n".join(c.source for c in committed.cells if c.cell_type == "markdown")
    headings = ["# PyTorch tensors on the GPU", "Intermediate", "Read these first",
                "Units that build on this one", "After this unit you can",
                "## The idea in one paragraph",
                "## A tensor is an array that knows which device holds it",
                "## A GPU applies one step to thousands of numbers at once",
                "Two processors, two memories, and a narrow link between them",
                "## The copy can take longer than the work",
                "Worked example: is one step worth a trip to the GPU?",
                "## A race: 256 numbers, several steps each", "## These numbers are rough",
                "## GPU work runs in the background", "## Check yourself", "## Go further",
                "## Where this shows up"]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions)
    assert text.count("<details><summary>Answer</summary>") == 3
