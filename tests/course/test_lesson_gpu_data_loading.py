"""The third lesson, gpu_data_loading: what it teaches, executed top to bottom on the CPU, and as
committed. What every lesson has is tested for every unit in test_lessons.py."""

import re

from lessons import cell_with, fixtures, flat, markdown, printed
from units import submissions

UNIT = "gpu_data_loading"
committed, executed = fixtures(UNIT)


def test_the_batches_are_uint8_images_made_on_the_cpu(executed):
    assert printed(cell_with(executed, "images = next(iter(loader))")) == (
        "torch.Size([64, 3, 224, 224]) torch.uint8 cpu\n9.63 MB a batch (counted)\n"
    )


def test_one_after_another_adds_up_and_overlapped_takes_the_slowest(executed, committed):
    sequential, overlapped = (
        printed(cell_with(executed, "one_after_another = Pipeline(")).strip().split("\n")
    )
    # No workers, pageable memory: a real loop without workers has no pinned side stream either.
    assert sequential == (
        "one after another: load 20 ms, copy 3.08 ms, compute 8 ms -> 31.1 ms a batch "
        "in steady state · bottleneck: load · GPU busy 26% of the time"
    )
    assert (
        "Settings(workers=0, pinned=False"
        in cell_with(committed, "one_after_another = Pipeline(").source
    )
    assert overlapped.endswith(
        "-> 20 ms a batch in steady state · bottleneck: load · GPU busy 40% of the time"
    )
    assert "20 + 3.08 + 8 ms: about 31.1 ms a batch" in flat(markdown(committed))


def test_workers_move_the_bottleneck_to_the_gpu(executed):
    lines = printed(cell_with(executed, "for workers in (1, 2, 3, 4):")).strip().split("\n")
    assert [line.split(":")[0] for line in lines] == [
        "1 worker",
        "2 workers",
        "3 workers",
        "4 workers",
    ]
    assert "10 ms a batch" in lines[1] and "bottleneck: load" in lines[1]
    assert (
        "8 ms a batch" in lines[2] and "bottleneck: compute" in lines[2] and "busy 100%" in lines[2]
    )


def test_this_machines_loader_is_measured_on_one_thread(executed):
    load, cores = printed(cell_with(executed, "load_ms = ms(")).strip().split("\n")
    assert re.fullmatch(
        r"one worker loads a batch of 64 in [\d.]+ ms \(measured, one CPU thread\)", load
    )
    assert re.fullmatch(
        r"this machine has \d+ CPU cores? for workers to share \(read from the system\)", cores
    )


def test_pinning_without_a_gpu_is_refused_and_said_so(executed, committed):
    assert printed(cell_with(executed, "pinned = images.pin_memory()")) == (
        "the loader's batch is pinned: False\n"
        "RuntimeError: Cannot access accelerator device when none is available.\n"
    )
    text = flat(markdown(committed))
    assert '`DataLoader(..., pin_memory=(device == "cuda"))`' in text
    # The guide's sentence, quoted as it is: it is about pin_memory() then a non-blocking copy.
    assert (
        '"Using `tensor.pin_memory().to(device, non_blocking=True)` can be up to twice as slow as a '
        'straightforward `tensor.to(device)`."'
    ) in text
    assert printed(cell_with(executed, "copy_lines(device, images)")).startswith(
        "No GPU here: nothing to copy to"
    )


def test_the_prefetcher_runs_on_the_cpu_and_uses_a_side_stream_on_a_gpu(executed, committed):
    source = cell_with(committed, "class Prefetcher:").source
    for line in [
        "with torch.cuda.stream(self.stream):",
        "batch.to(self.device, non_blocking=True)",
        "torch.cuda.current_stream().wait_stream(self.stream)",
        "copied.record_stream(torch.cuda.current_stream())",
    ]:
        assert line in source, line
    assert printed(cell_with(executed, "prefetched = Prefetcher(")) == "".join(
        f"{step} (64, 3, 224, 224) torch.uint8 cpu\n" for step in range(3)
    )
    text = flat(markdown(committed))
    assert "Work on one stream runs in order" in text and "must come from pinned memory" in text
    assert "Call `torch.cuda.synchronize()` (or wait on an event) before reading it" in text


def test_a_non_blocking_copy_is_safe_at_once_only_on_its_own_stream_and_a_pinned_source_waits(
    committed,
):
    """PyTorch's guide and CUDA semantics: stream order protects only the copy's own stream;
    another stream must wait_stream; a pinned source is read when the GPU reaches the copy."""
    text = flat(markdown(committed))
    assert "is safe to use at once" not in text.replace(
        "is safe to use at once **on the same stream**", ""
    )
    assert (
        "A copy **to** the GPU with `non_blocking=True` is safe to use at once **on the same stream**"
        in text
    )
    assert (
        "make that stream wait for the copy first, with `wait_stream`, as the prefetcher does"
        in text
    )
    assert "a **pinned** source must not be changed until the copy is done" in text


def test_uint8_moves_a_quarter_of_the_bytes_and_normalizes_to_the_same_values(executed):
    # A batch of 128, not the graded question's 256: the cell's output must not answer Check yourself 3.
    assert printed(cell_with(executed, "numbers = 128 * 3 * 224 * 224")) == (
        "torch.uint8: 19.3 MB (counted), 0.77 ms at 25 GB/s (assumed: the first unit's PCIe 4.0 x16 figure)\n"
        "torch.float32: 77.1 MB (counted), 3.08 ms at 25 GB/s (assumed: the first unit's PCIe 4.0 x16 figure)\n"
    )
    assert (
        printed(cell_with(executed, "def to_device_uint8(images, device):"))
        == "torch.float32 cpu True | largest difference: 0 (measured)\n"
    )
    assert re.fullmatch(
        r"normalizing a batch of 64 on one CPU thread: [\d.]+ ms \(measured\)\n",
        printed(cell_with(executed, "normalize_ms = ms(")),
    )


def test_the_bottleneck_is_found_from_stages_each_labelled(executed):
    """Each stage prints its figure for a batch of 64, the batch it names, and its source."""
    lines = printed(cell_with(executed, "speeds = measure_speeds(device)")).strip().split("\n")
    assert re.fullmatch(
        r"load: [\d.]+ ms for one worker to load a batch of 64 \(measured here: .*\)", lines[0]
    )
    assert re.fullmatch(
        r"normalize: [\d.]+ ms more to make a batch of 64 float32 \(measured here: .*\)", lines[1]
    )
    assert lines[2].startswith(
        "copy: 25 GB/s from pinned memory, 12.5 GB/s from pageable: 0.385 ms for "
        "the 9.63 MB of a batch of 64 as uint8, from pinned memory (assumed (no GPU here)"
    )
    assert lines[3].startswith(
        "compute: 2 ms for the GPU's step on a batch of 64 (assumed (no GPU here)"
    )
    assert lines[4].startswith("with 2 workers, pinned, a side stream, uint8: ")
    assert lines[4].endswith("(CPU stages measured here; copy and GPU step assumed)")


def test_the_timeline_runs_in_the_lessons_kernel_on_its_measured_speeds(executed):
    (output,) = cell_with(executed, "timeline = PipelineWidget(measured=speeds)").outputs
    assert "application/vnd.jupyter.widget-view+json" in output.data
    assert 'class="pipeline-fallback"' in output.data["text/html"]
    measured, assumed = printed(cell_with(executed, "timeline.play_now()")).strip().split("\n")
    assert measured.startswith("8 batches in ") and "bottleneck: load" in measured
    assert measured.endswith("(CPU stages measured here; copy and GPU step assumed).")
    assert assumed.startswith("8 batches in 371 ms · 46.3 ms a batch")


def test_predictions_come_before_the_cells_that_answer_them(committed):
    sources = [c.source for c in committed.cells]

    def index(snippet):
        return next(i for i, s in enumerate(sources) if snippet in s)

    for prompt, cell in [
        (
            "how long does a batch take one after another (no workers, pageable memory)?",
            "one_after_another = Pipeline(",
        ),
        ("how many workers does it take", "for workers in (1, 2, 3, 4):"),
        ("what does `pin_memory()` do on this machine?", "pinned = images.pin_memory()"),
        ("can it start before\nthe copy is done?", "class Prefetcher:"),
        ("how many MB is a batch of 128", "numbers = 128 * 3 * 224 * 224"),
        ("**Predict, then press Run:**", "timeline = PipelineWidget("),
    ]:
        assert index(prompt) < index(cell), prompt


def test_the_lesson_defines_the_three_cases_of_the_model(committed):
    """The lesson, the widget and gpucourse.input_pipeline.steady_ms say it the same way: no
    workers, the sum; workers but no pinned side stream, max(load / N, copy + compute);
    workers, pinned memory and a side stream, the slowest stage."""
    from gpucourse.input_pipeline import Pipeline, Settings, assumed_speeds

    text = flat(markdown(committed))
    assert (
        "With no workers (`num_workers=0`) the main process loads each batch itself, and in this "
        "model every stage then waits for the one before: a batch takes the **sum** of the three"
    ) in text
    assert (
        "the copy and the step add up, and a batch takes the larger of *load* / N and *copy* + "
        "*compute*"
    ) in text
    assert (
        "With workers (N of them deliver a batch every *load* / N ms), pinned memory and the copy on a "
        "side stream (section 3 shows how), the copy of the next batch runs while the GPU computes this one"
    ) in text
    # The model's assumption, said plainly: the loop waits for the GPU at every step.
    assert (
        "The model assumes that the loop waits for the GPU at every step, for example because it reads "
        "the loss (`loss.item()`) before it loads the next batch."
    ) in text
    assert "how long does a batch take one after another (no workers, pageable memory)?" in text
    # The model has exactly these three cases.
    speeds = assumed_speeds()
    for workers, pinned, side, expected in [
        (0, False, False, lambda load, copy, gpu: load + copy + gpu),
        (2, True, False, lambda load, copy, gpu: max(load, copy + gpu)),
        (2, False, True, lambda load, copy, gpu: max(load, copy + gpu)),
        (2, True, True, lambda load, copy, gpu: max(load, copy, gpu)),
    ]:
        pipeline = Pipeline(speeds, Settings(workers=workers, pinned=pinned, side_stream=side))
        stage = pipeline.stage_ms()
        load = stage["load"]
        assert pipeline.steady_ms() == expected(load, stage["copy"], stage["compute"])


def test_the_one_stream_case_is_stated_only_after_the_same_stream_prediction(committed):
    """Section 1 must not answer section 3's prompt (can the next copy run while this step
    computes, on one stream?): the one-stream case comes after that prompt and its fold."""
    sources = [c.source for c in committed.cells]
    at = next(i for i, s in enumerate(sources) if "can it start before\nthe copy is done?" in s)
    before = flat("\n".join(sources[:at]) + sources[at].split("**Predict first:**", 1)[0])
    after = flat(sources[at].split("</details>", 1)[1])
    one_stream = "the copy and the step add up, and a batch takes the larger of *load* / N and *copy* + *compute*"
    assert one_stream not in before and one_stream in after
    assert (
        "it cannot run while the GPU computes" not in before
        and "can't overlap anything" not in before
    )


def test_a_loop_that_never_waits_is_said_to_do_better_and_by_how_much(committed):
    further = flat(
        markdown(committed).split("## Go further", 1)[1].split("## Where this shows up")[0]
    )
    assert "A real loop can do a little better" not in further
    assert "a copy from pageable memory, or a `.item()`" not in further
    assert (
        "Then a blocking `.to()`, pinned or not, waits for the previous step before it copies"
        in further
    )
    assert "a batch takes about max(*load*, *compute*) + *copy*" in further
    assert f"max(20, 8) + 3.08 ≈ {20 + 3.08:.1f} ms rather than {20 + 3.08 + 8:.1f} ms" in further


def test_answers_to_predictions_are_folded_until_asked_for(committed):
    """What the cells under a prediction show is said only in a fold, never open beside it."""
    text = flat(markdown(committed))
    unfolded = flat(re.sub(r"<details>.*?</details>", "", markdown(committed), flags=re.S))
    for answer in [
        "20 + 3.08 + 8 ms: about 31.1 ms a batch",
        "Three: 20 / 3 ≈ 6.7 ms",
        "the GPU computes 17% of the time",
        "12.3 + 8 ≈ 20.3 ms",
        "26 + 12.3 + 8 ms",
    ]:
        assert answer in text and answer not in unfolded, answer
    assert (
        "20.3 ms with 4 workers" not in text
    )  # the table's "from 2 workers on", said the same way
    assert "from 2 workers on, 12.3 + 8 ≈ 20.3 ms a batch, and more workers change nothing" in text
    # The widget's prompt asks for the bottleneck; the fold names it, as the model does.
    from gpucourse.input_pipeline import Pipeline, Settings, assumed_speeds

    defaults = Pipeline(assumed_speeds(), Settings(workers=0, pinned=False, dtype="float32"))
    assert defaults.bottleneck() == "load" and f"{defaults.stage_ms()['load']:.3g}" == "26"
    assert "the loader, 26 ms, is the bottleneck" in text
    assert "the loader, 26 ms, is the bottleneck" not in unfolded


def test_where_the_loader_pins_and_what_non_blocking_does_from_pageable_memory(committed):
    text = flat(markdown(committed))
    assert "pins every batch in a background thread" not in text
    assert (
        "with `num_workers > 0`, a background thread of the main process pins each batch as it "
        "arrives from a worker; with `num_workers=0`, the main process pins each batch itself, inline"
    ) in text
    # Copy.cu: a blocking copy waits for the whole stream (memcpy_and_sync); non_blocking=True
    # leaves that wait out, pinned or not. From pageable memory the driver may still synchronize.
    lesson = flat(markdown(committed).split("## Sources", 1)[0])
    assert "no effect" not in lesson.replace('"the argument has no effect"', "")
    assert "flag or no flag" not in text and "So pin first, or leave the flag out." not in text
    assert (
        '`x.to("cuda")` queues the copy on the current CUDA **stream**, the GPU\'s queue of work, and '
        "then waits for the whole stream: for every kernel queued before the copy, then for the copy itself"
    ) in text
    assert (
        "PyTorch skips its own `cudaStreamSynchronize`. From **pinned** memory the call returns at once, "
        "and the CPU moves on. From pageable memory the CUDA driver may still synchronize with the stream "
        "while it stages the data into its pinned buffer, so don't count on the CPU moving on"
    ) in text
    assert "the CPU still stages the data itself" not in text and "does skip the wait" not in text
    assert "would only spare it the wait" not in text
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    assert "(https://docs.pytorch.org/docs/stable/generated/torch.Tensor.cuda.html)" in sources
    assert 'Otherwise, the argument has no effect." That is about the host' in sources
    assert "is not so" not in sources
    assert (
        "(https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/native/cuda/Copy.cu)"
        in sources
    )
    assert "with `non_blocking=False` it calls `memcpy_and_sync`" in sources
    assert "regardless of whether the original tensor is or isn't in pinned memory" in sources
    assert (
        "(https://github.com/pytorch/pytorch/blob/main/torch/utils/data/dataloader.py)" in sources
    )
    assert "(https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html)" in sources
    # NVIDIA's Asynchronous list, quoted; the staging sentence belongs to its Synchronous list.
    assert (
        '"For transfers between device memory and pageable host memory, the function might be '
        'synchronous with respect to host"'
    ) in sources
    assert (
        '"If pageable memory must first be staged to pinned memory, the driver may synchronize with the '
        'stream and stage the copy into pinned memory."'
    ) in sources
    assert "returns only once the data is there" not in sources
    # Not changing a pinned source before its copy is done is CUDA's, not the guide's.
    guide = next(line for line in sources.split("\n") if "pinmem_nonblock.html" in line)
    assert "must not be modified" not in guide
    memcpy = next(line for line in sources.split("\n") if "group__CUDART__MEMORY.html" in line)
    assert "asynchronous with respect to the host" in memcpy and "must not be changed" in memcpy


def test_mean_and_std_are_made_once_before_the_function_and_never_said_to_be_made_on_the_device(
    committed,
):
    source = cell_with(committed, "def to_device_uint8(images, device):").source
    before, function = source.split("def to_device_uint8", 1)
    body = function.split("\non_cpu =", 1)[0]
    assert "mean = torch.tensor(MEAN).view(1, -1, 1, 1).to(device)" in before
    assert "std = torch.tensor(STD).view(1, -1, 1, 1).to(device)" in before
    assert "torch.tensor(" not in body and "mean.to(device), std.to(device)" in body
    assert (
        "non_blocking=True" not in source and "no non_blocking" not in source
    )  # a plain blocking copy
    assert "made on the device" not in source
    assert "`torch.tensor(MEAN, device=device)` would not make them on the device" in flat(
        markdown(committed)
    )
    measured = cell_with(committed, "normalize_ms = ms(").source
    assert 'stats = channel_stats("cpu")' in measured and "normalize(images, stats)" in measured


def test_go_further_gives_the_conversions_memory_traffic_as_four_operations_and_fused(committed):
    """Counted from the bytes: .float() reads uint8 and writes float32; / 255, - mean and / std
    each read and write float32. Fused, one read of uint8 and one write of float32."""
    further = flat(
        markdown(committed).split("## Go further", 1)[1].split("## Where this shows up")[0]
    )
    numbers = 256 * 3 * 224 * 224
    four = numbers * (1 + 4) + 3 * numbers * (4 + 4)
    fused = numbers * (1 + 4)
    hbm = 3.35e12  # the H100 SXM's rated memory bandwidth, the lesson's source
    assert (
        f"about {four / 1e9:.2f} GB, about {four / hbm * 1e3:.2f} ms" in further
    )  # 1.12 GB, 0.33 ms
    assert f"{fused / 1e6:.0f} MB, about {fused / hbm * 1e3:.2f} ms" in further  # 193 MB, 0.06 ms
    assert "tenth of a millisecond" not in further


def test_check_yourself_asks_the_graded_questions_with_the_expected_answers(committed):
    text = flat(markdown(committed)).split("## Check yourself", 1)[1].split("## Go further", 1)[0]
    assert "Loading takes 5 ms per batch, the copy 2 ms and the computation 8 ms" in text
    assert "One loader worker takes 12 ms per batch" in text and "256 RGB images of 224×224" in text
    assert (
        "in the lesson's model (the loop waits for each step before it loads the next batch)"
        in text
    )
    for answer in [
        "15 ms",
        "8/15 ≈ 53.3%",
        "2 workers is the fewest",
        "154.140672 MB",
        "≈ 6.17 ms",
        "38.535168 MB",
        "≈ 1.54 ms",
    ]:
        assert answer in text, answer
    names = set(submissions(UNIT).SOLUTIONS)
    assert {
        "q1_overlap",
        "q2_workers",
        "q3_bytes",
        "q4_steady_state",
        "q5_to_device_uint8",
    } == names


def test_every_claim_has_a_primary_source(committed):
    sources = next(c.source for c in committed.cells if c.source.startswith("## Sources"))
    for url in [
        "https://docs.pytorch.org/docs/stable/data.html",
        "https://docs.pytorch.org/docs/stable/data.html#memory-pinning",
        "https://docs.pytorch.org/tutorials/intermediate/pinmem_nonblock.html",
        "https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-streams",
        "https://docs.pytorch.org/docs/stable/generated/torch.Tensor.record_stream.html",
        "https://docs.pytorch.org/docs/stable/benchmark_utils.html",
        "https://pcisig.com/specifications",
        "https://www.nvidia.com/en-us/data-center/h200/",
    ]:
        assert f"({url})" in sources, url
    assert "are made up, to show a pipeline's shape" in sources


def test_nothing_above_check_yourself_states_the_answers_to_question_3(committed, executed):
    """Question 3 (a batch of 256 images as float32 and uint8, at 25 GB/s) is graded: neither the
    text above it nor section 4's counting cell gives its figures."""
    above = markdown(committed).split("## Check yourself", 1)[0]
    for figure in ["38.5", "154.1", "154 MB", "1.54", "6.17", "38,535,168"]:
        assert figure not in above, figure
    counted = printed(cell_with(executed, "numbers = 128 * 3 * 224 * 224"))
    for figure in ["38.5", "154.1", "1.54", "6.17"]:
        assert figure not in counted, figure
