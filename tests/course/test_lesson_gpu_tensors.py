"""The first lesson, gpu_tensors: what it teaches, executed top to bottom on the CPU, and as
committed. What every lesson has is tested for every unit in test_lessons.py."""

import re

import pytest
from lessons import cell_with, fixtures, printed
from lessons import markdown as _markdown

UNIT = "gpu_tensors"
committed, executed = fixtures(UNIT)


def test_tensor_py_prints_the_seeds_lines(executed):
    assert printed(cell_with(executed, "x = torch.from_numpy(a)")) == (
        "torch.float64 torch.float32\ntorch.Size([2, 3]) cpu\n"
    )
    assert printed(cell_with(executed, "z = x * 10")) == ("cpu\n[[ 0.  0.  0.]\n [20. 40.  0.]]\n")


def test_from_numpy_shares_memory_and_torch_tensor_copies_keeping_float64(executed):
    assert printed(cell_with(executed, "copied = torch.tensor(a)")) == (
        "5.0 0.0\n"  # only the tensor from torch.from_numpy saw a[0, 0] = 5
        "torch.float64 torch.float32\n"
    )  # torch.tensor kept NumPy's float64


def test_a_model_moves_in_place_and_a_tensor_made_on_the_device_needs_no_copy(executed):
    assert printed(cell_with(executed, "moved = model.to(device)")) == "cpu cpu True\nTrue\n"


def test_size_py_prints_the_seeds_lines(executed):
    assert printed(cell_with(executed, "clouds = torch.zeros(8, 2048, 3)")) == (
        "torch.Size([8, 2048, 3]) torch.float32\n"
        "49152 numbers of 4 bytes each\n"
        "0.196608 MB (counted)\n"
    )


def test_device_error_cell_prints_the_error_and_the_fix_works(executed):
    message = printed(cell_with(executed, "x_far + y_cpu\nexcept RuntimeError"))
    assert message.startswith("RuntimeError: ") and "device" in message
    assert printed(cell_with(executed, "total = x_far + y_cpu.to(far)")) == "meta\n"


def test_the_text_quotes_the_meta_devices_message_as_it_is(executed):
    """Its words are not the GPU's: the text says exactly what a learner without a GPU sees."""
    message = printed(cell_with(executed, "x_far + y_cpu\nexcept RuntimeError"))
    shown = message.removeprefix("RuntimeError: ").strip()
    text = "\n".join(c.source for c in executed.cells if c.cell_type == "markdown")
    assert f"`{shown}`" in text.replace("\n", " ")


def test_worked_example_arithmetic_matches_the_text(executed):
    out = printed(cell_with(executed, "size_bytes = 1_000_000 * 3 * 4"))
    for line in [
        "1. size: 12 MB",
        "2. copy to the GPU: 0.48 ms",
        "3. work on the GPU: 0.016 ms",
        "GPU route: 0.98 ms against the CPU's 0.4 ms",
    ]:
        assert line in out


def test_measurements_print_units_and_say_there_is_no_gpu(executed):
    out = printed(cell_with(executed, "times = measure_step(device)"))
    one = float(re.search(r"CPU step, 1 thread: ([\d.]+) ms", out).group(1))
    assert one > 0
    assert "no GPU here" in out and "threads" not in out  # thread counts: in Go further


def test_without_a_gpu_the_verdict_claims_no_gpu_result(executed):
    """The CPU side is measured, the GPU side the text's assumption, and the verdict says
    so: it never calls a route faster "here" when nothing on the GPU was measured."""
    one = re.search(
        r"CPU step, 1 thread: ([\d.]+) ms",
        printed(cell_with(executed, "times = measure_step(device)")),
    ).group(1)
    verdict = printed(cell_with(executed, "print(times.verdict())"))
    assert f"CPU route, measured here: {one} ms on 1 thread" in verdict
    assert "GPU route, assumed (no GPU here): 0.480 ms + 0.016 ms + 0.480 ms = 0.976 ms" in verdict
    assert "Verdict: none measured. This machine has no GPU" in verdict
    assert "A labelled mix, your measured CPU against the text's assumed GPU" in verdict
    assert "faster here" not in verdict and "wins" not in verdict


def test_the_verdict_and_the_race_use_the_same_cpu_figure(executed):
    one = float(
        re.search(
            r"CPU step, 1 thread: ([\d.]+) ms",
            printed(cell_with(executed, "times = measure_step(device)")),
        ).group(1)
    )
    probe = printed(cell_with(executed, 'measured = race.races["measured"]'))
    assert f"race CPU step: {one:.3f} ms" in probe
    assert "race GPU assumed: True" in probe
    assert "With the assumed GPU" in probe or "Even the assumed GPU never wins" in probe


def test_the_lesson_says_why_this_cpu_differs_from_the_texts(executed):
    line = printed(cell_with(executed, "print(times.verdict())")).splitlines()[-1]
    here = float(re.search(r"One core took ([\d.]+) ms here", line).group(1))
    moved = float(re.search(r"One core here moved ([\d.]+) GB/s", line).group(1))
    assert moved == pytest.approx(24e6 / (here / 1e3) / 1e9, rel=0.05)
    if not 0.8 <= here / 0.4 <= 1.25:
        assert "Why: adding 1 is almost no arithmetic" in line


def test_race_cell_shows_the_live_widget_and_a_fallback(executed):
    (output,) = cell_with(executed, "race = RaceWidget(").outputs
    assert "application/vnd.jupyter.widget-view+json" in output.data
    assert "<table" in output.data["text/html"]


def test_background_timing_runs_on_cpu_and_explains(executed):
    out = printed(cell_with(executed, "timing = background_timing(device)"))
    assert "time without synchronize():" in out and "No GPU here" in out


def test_go_further_cells_run_on_cpu_and_say_what_a_gpu_would_show(executed):
    threads = printed(cell_with(executed, "print(times.threads_line())"))
    assert re.fullmatch(
        r"CPU step, \d+ threads: [\d.]+ ms \(1 thread: [\d.]+ ms\), both measured\n", threads
    )
    assert printed(cell_with(executed, "print(link_report(times))")).startswith("No GPU here")
    assert printed(cell_with(executed, "print(event_timing(device))")).startswith("No GPU here")


def test_committed_fallbacks_read_without_a_kernel_and_fold_the_answer(committed):
    figure = cell_with(committed, "SVG(two_processors_svg())").outputs[0].data
    assert "copy: slow" in figure["image/svg+xml"]
    race = cell_with(committed, "race = RaceWidget(").outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" not in race
    html = race["text/html"]
    assert "Total ticks: CPU = 32 × steps, GPU = 40 + steps + 40" in html
    shown, folded = html.split("<details>", 1)
    assert "ticks</td>" not in shown and "wins" not in shown
    assert "<td>3</td><td>96 ticks</td><td>83 ticks</td>" in folded
    assert "wins" not in race["text/plain"] and "ticks" not in race["text/plain"]


def test_predictions_are_asked_before_their_outputs(committed):
    sources = [c.source for c in committed.cells]

    def index(snippet):
        return next(i for i, s in enumerate(sources) if snippet in s)

    assert index("write down the two dtypes") < index("x = torch.from_numpy(a)")
    assert index("Which of them sees the change?") < index("copied = torch.tensor(a)")
    assert index("Predict, press Run") < index("race = RaceWidget(")
    assert index("**Predict first:** how many megabytes") < index("clouds = torch.zeros")
    # Each of these prompts has its answer folded right under it, before the cell.
    for prompt, cell in [
        ("what does `x_far + y_cpu` give?", "x_far + y_cpu\nexcept"),
        ("which route will be faster for one step?", "times = measure_step("),
        ("which of the three times is the smallest?", "background_timing(device)"),
    ]:
        at = index(prompt)
        assert at < index(cell)
        after = sources[at].split(prompt, 1)[1]
        assert after.lstrip().startswith("<details><summary>Answer</summary>"), prompt


def test_seed_sections_appear_in_order(committed):
    text = "\n".join(c.source for c in committed.cells if c.cell_type == "markdown")
    headings = [
        "# PyTorch tensors on the GPU",
        "Intermediate",
        "Read these first",
        "Units that build on this one",
        "After this unit you can",
        "## The idea in one paragraph",
        "## A tensor is an array that knows which device holds it",
        "## A GPU applies one step to thousands of numbers at once",
        "Two processors, two memories, and a narrow link between them",
        "## The copy can take longer than the work",
        "Worked example: is one step worth a trip to the GPU?",
        "## A race: 256 numbers, several steps each",
        "## These numbers are rough",
        "## Timing GPU work",
        "## Check yourself",
        "## Go further",
        "## Where this shows up",
        "## Sources",
    ]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions)
    # Three Check yourself answers, and the folded answers to three predictions.
    assert text.count("<details><summary>Answer</summary>") == 6


def test_the_header_states_35_minutes_and_5_more(committed):
    header = committed.cells[0].source
    assert '**Time:** about 35 minutes, and 5 more for "Go further"' in header


def test_what_goes_beyond_the_seed_is_in_go_further(committed):
    """The link report, the thread counts and CUDA events are not on the main path."""
    sources = [c.source for c in committed.cells]
    further = next(i for i, s in enumerate(sources) if "## Go further" in s)
    for snippet in [
        "print(link_report(times))",
        "print(times.threads_line())",
        "print(event_timing(device))",
        "torch.cuda.Event(",
    ]:
        assert min(i for i, s in enumerate(sources) if snippet in s) > further, snippet


def test_pinned_and_pageable_memory_are_defined_before_they_are_used(committed):
    # Links to the other units name them by title ("... pinned memory and overlap"): a
    # title is not a use of the word.
    text = re.sub(r"\[[^\]]*\]\([^)]*\.ipynb[^)]*\)", "", _markdown(committed))
    paragraph = text.index("A copy to the GPU starts from one of two kinds of memory.")
    assert "Ordinary **pageable** memory is" in text[paragraph : paragraph + 200]
    assert "**Pinned** (page-locked) memory stays" in text[paragraph : paragraph + 400]
    assert text.lower().index("pageable") > paragraph and text.lower().index("pinned") > paragraph


def test_go_further_says_what_pytorch_does(committed):
    further = _markdown(committed).split("## Go further", 1)[1]
    flat = " ".join(further.split())
    # pin_memory() returns a pinned copy; pinning has a cost; the measured pinned route leaves it out.
    assert "`x.pin_memory()` returns a **copy** of `x` in pinned memory" in flat
    # The guide's sentence, quoted as it is: it is about pin_memory() then a non-blocking copy.
    assert (
        '"using `tensor.pin_memory().to(device, non_blocking=True)` can be up to twice as slow as a '
        'straightforward `tensor.to(device)`"'
    ) in flat
    assert "the pinned figure measured above leaves out the cost of pinning" in flat
    # non_blocking lets the host go on; the copy stays in order on its stream; the way back syncs.
    assert "lets the CPU go on at once" in flat and "still runs in order" in flat
    # Copy.cu: a blocking copy waits for the whole stream; non_blocking=True leaves that wait
    # out, pinned or not. From pageable memory the driver may still synchronize (NVIDIA's
    # API synchronization behavior), so the lesson does not promise the CPU goes on.
    assert (
        'A plain `x.to("cuda")` queues the copy and then waits for the whole stream, the GPU\'s queue: '
        "for all the work queued before the copy, then for the copy."
    ) in flat
    assert (
        "with `non_blocking=True` PyTorch skips its own `cudaStreamSynchronize`, but the CUDA driver may "
        "still synchronize with the stream while it stages the data into pinned memory, so don't count on "
        "the CPU going on."
    ) in flat
    assert "the CPU still stages the data itself" not in flat and "does skip the wait" not in flat
    lesson = flat.split("## Sources", 1)[0]
    assert "no effect" not in lesson and "as if the flag were not there" not in lesson
    assert "needs the copy on another stream (`torch.cuda.Stream`)" in flat
    assert "call `torch.cuda.synchronize()` before the CPU reads `y`" in flat
    # DataLoader(pin_memory=True) alone does not overlap the copy with the work.
    assert (
        "Pinned batches and the flag alone do not copy the next batch while the GPU works on the last"
        in flat
    )
    # Threads compete with other programs on a busy machine.
    assert "so all of them can come out slower than one" in flat
    # CUDA events: the warm-up matters; a synchronize before start is optional.
    assert (
        "What matters is the warm-up" in flat and "A synchronize before `start` is optional" in flat
    )
    assert "so that only the work in between is timed" not in flat
    # The CUDA events pattern: warm up, synchronize, record, synchronize, read.
    code = further.split("```python", 1)[1].split("```", 1)[0]
    order = [
        "# warm-up",
        "torch.cuda.synchronize()",
        "start.record()",
        "end.record()",
        "torch.cuda.synchronize()",
        "elapsed_time",
    ]
    at, positions = 0, []
    for part in order:
        at = code.index(part, at) + 1
        positions.append(at)
    assert positions == sorted(positions)


def test_every_claim_has_a_primary_source(committed):
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    for url in [
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to",
        "https://docs.pytorch.org/docs/stable/generated/torch.from_numpy.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.pin_memory.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html",
        "https://docs.pytorch.org/docs/stable/meta.html",
        "https://docs.pytorch.org/docs/stable/data.html#memory-pinning",
        "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        "a100-datasheet",
        "t4-tensor-core-datasheet",
        "https://pcisig.com/specifications",
        "https://doi.org/10.1145/1498765.1498785",
    ]:
        assert f"({url}" in sources or url in sources, url
    # The text's own figures are named as assumed, not passed off as measured here.
    assert "measured there, assumed here" in sources
    for url in [
        "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Copy.cu",
        "https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html",
        "https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/TensorIterator.cpp",
        "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#using-cuda-gpu-timers",
    ]:
        assert f"({url})" in sources, url
    assert "with `non_blocking=False` it calls `memcpy_and_sync`" in sources
    assert "moves the parameters and buffers in place" in sources
    # NVIDIA's Asynchronous list, quoted; the staging sentence is from its Synchronous list.
    assert (
        '"For transfers between device memory and pageable host memory, the function might be '
        'synchronous with respect to host"'
    ) in sources
    assert (
        '"If pageable memory must first be staged to pinned memory, the driver may synchronize with the '
        'stream and stage the copy into pinned memory."'
    ) in sources
    assert "the call returns once the data is there" not in sources
    # The Tensor.cuda docstring is about the host, and is not called wrong.
    assert "shows that last sentence is not so" not in sources
    assert "That is about the host" in sources
    for url in [
        "https://docs.pytorch.org/tutorials/recipes/recipes/profiler_recipe.html",
        "https://docs.python.org/3/library/os.html#os.cpu_count",
    ]:
        assert f"({url})" in sources, url


def test_claims_without_a_source_are_gone_and_the_texts_figure_is_labelled(committed):
    text = " ".join(_markdown(committed).split())
    assert "from 4 to 24" not in text and "`os.cpu_count()` says how many this computer has" in text
    assert "Memcpy HtoD" not in text
    assert "reaches about 25 GB per second in practice" not in text
    assert (
        "from pinned memory the text's computer reached about 25 GB per second (measured on the text's "
        "computer, assumed here)"
    ) in text


def test_headings_above_a_prediction_do_not_answer_it(committed):
    sources = [c.source for c in committed.cells]
    device = next(s for s in sources if "what does `x_far + y_cpu` give?" in s)
    assert (
        "### Mixing devices in one operation" in device
        and "must be on the same device" not in device
    )
    timing = next(s for s in sources if "which of the three times is the smallest?" in s)
    before = timing.split("**Predict first:**", 1)[0]
    assert before.startswith("## Timing GPU work") and "background" not in before
    assert "waits until" not in before and "synchronizes for you" not in before
    after = next(s for s in sources if "therefore measures almost nothing" in s)
    assert "**GPU work runs in the background.**" in after and "synchronizes for you" in after


def test_the_t4_figures_follow_from_its_rated_speeds(committed):
    text = " ".join(_markdown(committed).split())
    assert "Its link is PCIe 3.0 x16, rated at 15.75 GB/s each way" in text
    assert "its memory at 320 GB/s" in text
    copy, step = 12e6 / 15.75e9 * 1e3, 24e6 / 320e9 * 1e3
    assert f"at least {copy:.2f} ms each way" in text
    assert f"the step {step:.3f} ms" in text
    assert f"the GPU route at least {2 * copy + step:.1f} ms" in text


def test_the_header_names_the_four_labels_the_other_lessons_use(committed):
    header = " ".join(committed.cells[0].source.split())
    assert (
        "Every figure says whether it was **measured** on your machine, **counted** from the tensors, "
        "or **assumed** (from a source, or made up to show a shape, and then said to be made up)."
    ) in header


def test_each_line_of_the_worked_example_says_what_kind_of_figure_it_is(executed):
    lines = printed(cell_with(executed, "size_bytes = 1_000_000 * 3 * 4")).strip().split("\n")
    assert lines[0].endswith("(counted)")
    assert all("(assumed:" in line or "(all assumed)" in line for line in lines[1:]), lines


@pytest.mark.parametrize(
    "prompt_words, cell_words, answer_words",
    [
        (
            "Which of them sees the change?",
            "copied = torch.tensor(a)",
            "`torch.from_numpy` copies nothing",
        ),
        (
            "which of the three times is the smallest?",
            "background_timing(device)",
            "therefore measures almost nothing",
        ),
    ],
    ids=["copy-or-share", "background-timing"],
)
def test_an_explanation_comes_after_its_prediction_and_its_cell(
    committed, prompt_words, cell_words, answer_words
):
    sources = [c.source for c in committed.cells]
    prompt = next(i for i, s in enumerate(sources) if prompt_words in s)
    cell = next(i for i, s in enumerate(sources) if cell_words in s)
    answer = next(i for i, s in enumerate(sources) if answer_words in s)
    assert prompt < cell < answer


def test_the_copy_or_share_prompt_does_not_answer_itself(committed):
    prompt = next(c.source for c in committed.cells if "Which of them sees the change?" in c.source)
    assert "share one block of memory" not in prompt and "copies its input" not in prompt


def test_the_device_rule_and_its_one_exception_hold_as_the_lesson_says(committed):
    """A 0-dim CPU tensor is accepted as a number (TensorIterator's CPU-scalar rule); a
    1-element CPU tensor with a dimension is not."""
    import torch

    text = " ".join(
        "\n".join(c.source for c in committed.cells if c.cell_type == "markdown").split()
    )
    assert (
        "The one exception is a 0-dim CPU tensor, such as `torch.tensor(2.0)`, which is treated as a "
        "number: `x_far * torch.tensor(2.0)` works on any device."
    ) in text
    x_far = torch.ones(3, device="meta")
    assert (x_far * torch.tensor(2.0)).device.type == "meta"
    with pytest.raises(RuntimeError):
        x_far * torch.ones(1)


def test_model_to_moves_buffers_as_well_as_parameters(committed):
    import torch

    text = " ".join(
        "\n".join(c.source for c in committed.cells if c.cell_type == "markdown").split()
    )
    assert "moves the model's weights (its parameters) and its buffers" in text
    norm = torch.nn.BatchNorm1d(3)
    assert norm.to("meta") is norm and norm.running_mean.device.type == "meta"
