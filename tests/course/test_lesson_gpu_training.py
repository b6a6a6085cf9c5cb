"""The second lesson, gpu_training: what it teaches, executed top to bottom on the CPU, and as
committed. What every lesson has is tested for every unit in test_lessons.py."""

import re

import pytest
from lessons import cell_with, fixtures, flat, markdown, printed
from units import submissions

UNIT = "gpu_training"
committed, executed = fixtures(UNIT)


def test_a_model_moves_in_place_and_a_tensor_must_be_assigned(executed):
    assert printed(cell_with(executed, "moved = model.to(far)")) == "meta True\ncpu\n"
    assert printed(cell_with(executed, "batch = batch.to(far)")) == "meta\n"


def test_a_tensor_made_on_the_device_and_to_on_the_same_device_returns_it(executed):
    assert printed(cell_with(executed, "y = x.to(device)")) == "cpu True\nFalse\n"


def test_the_data_set_is_made_with_torch_on_the_cpu_with_int64_labels(executed):
    out = printed(cell_with(executed, "inputs, labels = spirals()"))
    assert out.startswith(
        "torch.Size([3000, 2]) torch.float32 cpu\ntorch.Size([3000]) torch.int64 ["
    )


def test_the_loop_trains_and_reads_the_loss_once(executed, committed):
    loop = cell_with(committed, "def train(model, optimizer, loader, epochs=1):").source
    body = loop.split("for x, y in loader:", 1)[1]
    assert ".item()" not in body and "print(" not in body and ".cpu()" not in body
    assert "x, y = x.to(where), y.to(where)" in body and "total += loss.detach()" in body
    run = cell_with(committed, "mean_loss = train(").source
    assert run.index(").to(device)") < run.index("torch.optim.Adam(model.parameters()")
    out = printed(cell_with(executed, "mean_loss = train("))
    loss = float(re.fullmatch(r"mean loss over 3 epochs: ([\d.]+)\n", out).group(1))
    assert 0 < loss < 1.0986  # below ln 3, a guess among three classes: it learned


def test_the_device_error_is_shown_as_it_is_and_fixed(executed, committed):
    message = printed(cell_with(executed, "far_model(cpu_batch)\nexcept RuntimeError"))
    assert message.startswith("RuntimeError: ") and "device" in message
    shown = message.removeprefix("RuntimeError: ").strip()
    text = flat(markdown(committed))
    assert "on `meta` it is the message above" in text
    # Only the stable beginning of CUDA's message is quoted: its ending changes between releases.
    assert "the message begins `Expected all tensors to be on the same device` and goes on" in text
    assert "cuda:0 and cpu" not in text
    assert shown == "Tensor on device meta is not on the expected device cpu!"
    assert printed(cell_with(executed, "far_model(cpu_batch.to(where))")) == "meta\n"


def test_the_dtype_error_is_shown_and_long_labels_fix_it(executed, committed):
    out = printed(cell_with(executed, "F.cross_entropy(logits, file_labels)"))
    error, fixed = out.strip().split("\n")
    assert error.startswith("RuntimeError: ") and "Long or Byte" in error and "Double" in error
    assert fixed == "torch.float32"
    text = flat(markdown(committed))
    assert "`Long`, PyTorch's name for int64, or `Byte`, uint8" in text
    assert (
        "float targets of the same shape as the input, one number per class, are read as class probabilities"
        in text
    )
    # What the text says cross_entropy accepts, it accepts; and what it refuses, it refuses.
    import torch
    import torch.nn.functional as F

    logits = torch.randn(4, 3)
    assert (
        F.cross_entropy(logits, torch.tensor([0, 2, 1, 2], dtype=torch.uint8)).dtype
        == torch.float32
    )
    assert F.cross_entropy(logits, torch.softmax(torch.randn(4, 3), dim=1)).dtype == torch.float32
    with pytest.raises(RuntimeError, match="Long or Byte"):
        F.cross_entropy(logits, torch.tensor([0.0, 2.0, 1.0, 2.0], dtype=torch.float64))
    # The prompt does not state the answer above itself.
    sources = [c.source for c in committed.cells]
    prompt = next(s for s in sources if "what does `cross_entropy` say to float64 labels?" in s)
    assert "int64" not in prompt and "Long" not in prompt


def test_host_reads_are_found_by_running_them_and_only_the_running_total_stays(executed):
    lines = printed(cell_with(executed, "find_host_reads(device)")).strip().split("\n")
    assert len(lines) == 7
    for line in [
        "loss.item()",
        "float(loss)",
        "print(loss)",
        "loss.cpu()",
        "loss.detach().cpu().numpy()",
        "if loss < 0.1: ...",
    ]:
        assert any(
            said.startswith(f"{line}: reads the value on the host (on meta") for said in lines
        ), line
    assert lines[-1].startswith("total += loss.detach(): stays on the device")


def test_each_read_is_a_wait(executed):
    out = printed(cell_with(executed, "waits(3000, every)"))
    assert out.splitlines()[1:] == [
        "                         1 -> 3,000 times",
        "                        10 -> 300 times",
        "                       100 -> 30 times",
        "                     3,000 -> 1 times",
    ]


def test_the_cost_of_reads_is_measured_and_explained_honestly_on_the_cpu(executed, committed):
    often, rarely, why = (
        printed(cell_with(executed, "cost = measure_reads(device)")).strip().split("\n")
    )
    assert re.fullmatch(r"read every step: [\d,]+ steps/s \(measured on cpu, batch 64\)", often)
    assert re.fullmatch(
        r"read every 100 steps: [\d,]+ steps/s \(measured on cpu, batch 64\)", rarely
    )
    assert why.startswith("On this CPU, reading every step was") and "(measured)" in why
    assert "On a CPU there is no queue" in why
    # Without a GPU, nothing is said about one as if it were measured.
    assert "No GPU here, so nothing was measured on one." in why and "much more" not in why
    assert 'The widget\'s "modelled GPU" mode shows it, with made-up times.' in why
    text = flat(markdown(committed))
    assert "On a CPU, reading every step and every 100 steps give close speeds" in text
    assert "That is the honest result here, not a flaw of the widget." in text


def test_the_widget_trains_in_the_lessons_kernel_with_measured_speeds(executed):
    (output,) = cell_with(executed, "trainer = TrainingWidget(device)").outputs
    assert "application/vnd.jupyter.widget-view+json" in output.data
    assert 'class="training-fallback"' in output.data["text/html"]
    status, readings = (
        printed(cell_with(executed, "await trainer.play(pause=0)")).strip().split("\n")
    )
    assert status.startswith("done: step 300 of 300 on cpu · measured: ") and "samples/s" in status
    assert readings == "cpu 30"


def test_memory_is_counted_from_the_tensors_and_says_what_a_gpu_adds(executed):
    out = printed(cell_with(executed, "step_memory(device)"))
    assert "4.00 times the weights (counted from the tensors)" in out
    assert "No GPU here, so no allocator to ask" in out and "torch.cuda.memory_allocated()" in out
    assert printed(cell_with(executed, "training_mb(1_000_000, copies)")) == (
        "SGD: 2 copies, 8 MB (assumed: 1,000,000 made-up parameters x 4 bytes x copies)\nSGD with momentum: 3 copies, 12 MB (assumed: 1,000,000 made-up parameters x 4 bytes x copies)\nAdam: 4 copies, 16 MB (assumed: 1,000,000 made-up parameters x 4 bytes x copies)\n"
    )
    assert printed(cell_with(executed, "print(peak_memory(device))")).startswith("No GPU here")


def test_evaluation_reads_once_and_the_model_learned(executed, committed):
    cell = cell_with(committed, "model.eval()").source
    assert (
        "with torch.no_grad():" in cell and cell.count(".item()") == 1 and "model.train()" in cell
    )
    out = printed(cell_with(executed, "predictions = model(inputs.to(device))"))
    accuracy = float(re.fullmatch(r"accuracy on the training set: ([\d.]+)%\n", out).group(1))
    assert accuracy > 80


def test_a_gpu_checkpoint_fails_without_map_location_and_loads_with_it(executed):
    out = printed(cell_with(executed, "checkpoint = saved_on_gpu(model)"))
    assert out.startswith("RuntimeError: Attempting to deserialize object on a CUDA device")
    assert (
        printed(cell_with(executed, "torch.load(checkpoint, map_location=device)")) == "cpu True\n"
    )


def test_every_printed_figure_says_how_it_was_got(executed):
    """Speeds are measured; on the CPU, memory is counted; nothing is silently assumed."""
    for snippet in ["cost = measure_reads(device)", "await trainer.play(pause=0)"]:
        for line in printed(cell_with(executed, snippet)).splitlines():
            if "steps/s" in line:
                assert "measured" in line, line
    memory = printed(cell_with(executed, "step_memory(device)"))
    assert "bytes" in memory and "(counted from the tensors)" in memory


def test_predictions_come_before_the_cells_that_answer_them(committed):
    sources = [c.source for c in committed.cells]

    def index(snippet):
        return next(i for i, s in enumerate(sources) if snippet in s)

    for prompt, cell in [
        ("which device does each printed line name?", "moved = model.to(far)"),
        ("what do the two `is` tests print?", "y = x.to(device)"),
        ("**Predict first:** what happens?", "far_model(cpu_batch)"),
        ("what does `cross_entropy` say to float64 labels?", "file_labels = "),
        ("other six lines, if any, stay there too?", "find_host_reads("),
        ("how much slower is reading every step?", "measure_reads(device)"),
        ("**Predict, then press Train**", "TrainingWidget(device)"),
        ("how many\ntimes the weights' bytes", "step_memory(device)"),
        ("what does `torch.load` do with a checkpoint", "saved_on_gpu(model)"),
    ]:
        assert index(prompt) < index(cell), prompt


def test_the_modelled_gpu_figures_in_the_lesson_are_the_models_and_folded(committed):
    from gpucourse.training import GpuModel

    text = flat(markdown(committed))
    unfolded = flat(re.sub(r"<details>.*?</details>", "", markdown(committed), flags=re.S))
    model = GpuModel()
    for batch in (64, 512):
        said = f"about {model.slowdown(1, batch):.2f} times slower"
        assert said in text and said not in unfolded, said
    assert "close speeds" not in unfolded  # the widget's answer waits in its fold
    assert "**modelled GPU (made-up times)**" in text and "measures nothing" in text


def test_predictions_are_not_answered_above_their_prompts(committed):
    sources = [c.source for c in committed.cells]

    def index(snippet):
        return next(i for i, s in enumerate(sources) if snippet in s)

    # The multiples, and the list that adds up to them, come after the memory cell.
    assert (
        index("**4 times** for Adam")
        > index("step_memory(device)")
        > index("how many\ntimes the weights' bytes")
    )
    assert index("(`exp_avg` and `exp_avg_sq`)") > index("step_memory(device)")
    # Where a model and a batch end up, and what .to() does with a tensor already there, are
    # said after the cells that show them.
    moving = sources[index("which device does each printed line name?")]
    assert (
        "in place" not in moving and "new** tensor" not in moving and "leaves `batch`" not in moving
    )
    assert index("leaves `batch` where it was") > index(
        "batch.to(far)              # the batch's .to()"
    )
    assert "in place" not in sources[index("batch.to(far)              # the batch's .to()")]
    already = sources[index("what do the two `is` tests print?")]
    assert "returns the tensor itself" not in already.split("<details>", 1)[0]
    # The seven lines are listed without saying which ones wait; that comes after the cell.
    prompt = sources[index("other six lines, if any, stay there too?")]
    for line in [
        "`loss.item()`",
        "`float(loss)`",
        "`print(loss)`",
        "`loss.cpu()`",
        "`loss.detach().cpu().numpy()`",
        "`if loss < 0.1: ...`",
        "`total += loss.detach()`",
    ]:
        assert line in prompt, line
    assert index("The other six all need the number on the host") > index("find_host_reads(device)")
    # Adam's state is named after the memory cell, not in the prompt above it.
    memory = sources[index("how many\ntimes the weights' bytes")]
    assert "running averages" not in memory and "its square" not in memory
    # The two slips are named as errors only after the cells that show them.
    device_prompt = sources[index("**Predict first:** what happens?")]
    assert "error" not in device_prompt.lower() and "another\ndevice" not in device_prompt
    assert index("**the device error**") > index("far_model(cpu_batch)\nexcept")
    dtype_prompt = sources[index("what does `cross_entropy` say to float64 labels?")]
    assert "error" not in dtype_prompt.lower()
    assert index("That is **the dtype error**") > index("file_labels = ")


def test_non_blocking_from_pageable_memory_is_not_promised_and_the_spirals_are_copied_once(
    committed,
):
    text = flat(markdown(committed))
    assert (
        '`x.to("cuda", non_blocking=True)` skips PyTorch\'s own wait, its `cudaStreamSynchronize`; but '
        "from pageable memory the CUDA driver may still synchronize with the stream while it stages the "
        "data, so don't count on it there"
    ) in text
    assert "does not even stage the data itself" not in text
    assert "their spirals are copied to the device once, before the loop" in text
    assert "made on the device from the start" not in text
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    assert (
        "(https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Copy.cu)"
        in sources
    )
    assert "(https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html)" in sources
    assert (
        "the driver may synchronize with the stream and stage the copy into pinned memory"
        in sources
    )


def test_torch_tensor_with_a_device_is_taught_as_a_copy(committed):
    text = flat(markdown(committed))
    assert (
        "`torch.tensor(data, device=device)` is different: it reads Python numbers (or an array) "
        "that live on the CPU, so it builds the tensor there and then copies it to the device"
    ) in text
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    assert (
        "(https://github.com/pytorch/pytorch/blob/main/torch/csrc/utils/tensor_new.cpp)" in sources
    )


def test_peak_memory_counts_the_foreach_step(committed):
    further = flat(
        markdown(committed).split("## Go further", 1)[1].split("## Where this shows up")[0]
    )
    assert "`foreach` implementation by default" in further
    assert (
        "about one more copy of them at its peak (the `torch.optim.Adam` docs, `foreach`)"
        in further
    )
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    assert "uses ~ sizeof(params) more peak memory than the for-loop version" in sources


def test_check_yourself_asks_the_graded_questions(committed):
    text = flat(markdown(committed)).split("## Check yourself", 1)[1].split("## Go further", 1)[0]
    assert "25,000,000 float32 parameters" in text and "MB (10<sup>6</sup> bytes)" in text
    assert "loop of 1,000 steps" in text and "every 100 steps" in text and "once at the end" in text
    assert '`model.to("cuda")` or `batch.to("cuda")`' in text
    assert "400 MB" in text and "200 MB" in text and "300 MB" in text  # inside the folds
    names = set(submissions(UNIT).SOLUTIONS)
    assert {
        "q1_memory",
        "q2_waits",
        "q3_must_assign",
        "q4_train_step",
        "q5_load_checkpoint",
    } <= names


def test_the_committed_fallback_folds_what_to_look_for(committed):
    html = cell_with(committed, "trainer = TrainingWidget(device)").outputs[0].data["text/html"]
    shown, folded = html.split("<details>", 1)
    assert "Predict before you train" in shown and "no queue" not in shown
    assert "no queue" in folded and "steps/s" not in html


def test_go_further_says_what_pytorch_does(committed):
    further = flat(
        markdown(committed).split("## Go further", 1)[1].split("## Where this shows up")[0]
    )
    assert 'torch.cuda.set_sync_debug_mode("warn")' in further and "experimental" in further
    assert "torch.cuda.max_memory_allocated()" in further and "reset_peak_memory_stats()" in further
    assert "`torch.cuda.memory_reserved()`" in further
    assert "(`set_to_none=True`)" in further and "`Adam(..., amsgrad=True)`" in further


def test_every_claim_has_a_primary_source(committed):
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    for url in [
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.to.html",
        "https://docs.pytorch.org/docs/stable/optim.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.SGD.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.Adam.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.cross_entropy.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html",
        "https://docs.pytorch.org/tutorials/recipes/recipes/tuning_guide.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.set_sync_debug_mode.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.cuda.memory_allocated.html",
        "https://docs.pytorch.org/docs/stable/notes/autograd.html#saved-tensors",
        "https://docs.pytorch.org/docs/stable/generated/torch.no_grad.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.save.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.load.html",
        "https://docs.pytorch.org/tutorials/beginner/saving_loading_models.html#saving-loading-model-across-devices",
        "https://docs.pytorch.org/docs/stable/meta.html",
        "https://docs.pytorch.org/docs/stable/benchmark_utils.html",
    ]:
        assert f"({url})" in sources, url
    assert "nothing is assumed from another computer" in sources


def test_go_further_resumes_on_another_device_with_the_optimizer(executed):
    size, where = (
        printed(cell_with(executed, "moved_on_optimizer.load_state_dict")).strip().split("\n")
    )
    ratio = float(re.search(r"([\d.]+) times the weights alone \(measured\)", size).group(1))
    assert 2.5 < ratio < 3.5  # the weights, and Adam's two moments of the same size
    assert where == "step: cpu, exp_avg: meta, exp_avg_sq: meta"


def test_the_header_names_the_four_labels_and_the_device_rule_its_exception(committed):
    header = " ".join(committed.cells[0].source.split())
    assert (
        "Every figure says whether it was **measured** on your machine, **counted** from the tensors, "
        "or **assumed** (from a source, or made up to show a shape, and then said to be made up)."
    ) in header
    text = flat(markdown(committed))
    assert (
        "PyTorch does not copy an operation's tensors to one device for you. The exceptions: a 0-dim "
        "CPU tensor, which it treats as a number"
    ) in text
    assert "and CPU index tensors in indexing" in text
    assert "moves the model's parameters and buffers **in place**" in text
