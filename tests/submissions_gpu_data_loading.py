"""Realistic submissions of the gpu_data_loading exercises, built from the committed release.

The API is every unit's: see tests/submission_kit.py (tests/units.py finds this module).
"""

from __future__ import annotations

from tests import submission_kit as kit

ASSIGNMENT = "gpu_data_loading"

# The answers to the Check yourself questions, as they would be printed. None of them may
# appear in the release, in a visible test, or in a failure message. (12, 8 and 2 are
# numbers the questions themselves state, so they cannot be told apart here.)
ANSWER_VALUES: tuple[str, ...] = (
    "15",
    "15.0",
    "53.3",
    "53.33",
    "53.333",
    "154.1",
    "154.14",
    "154.140672",
    "38.54",
    "38.535",
    "38.535168",
    "6.17",
    "6.166",
    "6.1656",
    "1.54",
    "1.541",
    "1.5414",
)


ROOT = kit.ROOT
without_cell, with_cell_source = kit.without_cell, kit.with_cell_source
SOURCE, RELEASE, SOLUTIONS, POINTS, TOTAL, Mistake, answer_values_in = kit.unit(
    ASSIGNMENT, ANSWER_VALUES, __name__
)


def _steady_state(*body: str) -> str:
    return "def steady_state(stage_ms, workers, overlap):\n" + "\n".join(
        f"    {line}" for line in body
    )


def _to_device(*body: str) -> str:
    return "def to_device_uint8(images, device, mean, std):\n" + "\n".join(
        f"    {line}" for line in body
    )


PER_BATCH = (
    'per_batch = {"load": stage_ms["load"] / max(workers, 1), "copy": stage_ms["copy"], '
    '"compute": stage_ms["compute"]}'
)
UNPACK = "load, copy, compute = per_batch.values()"
RIGHT_MS = (
    "ms = (load + copy + compute if workers == 0 else max(load, copy, compute) if overlap "
    "else max(load, copy + compute))"
)
BOTTLENECK = (
    'bottleneck = ("copy + compute" if workers and not overlap and copy + compute >= load '
    "else max(per_batch, key=per_batch.get))"
)


def _q4(per_batch=PER_BATCH, ms=RIGHT_MS, bottleneck=BOTTLENECK) -> str:
    return _steady_state(per_batch, UNPACK, ms, bottleneck, "return ms, bottleneck")


MEAN_STD = (
    "mean = torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)",
    "std = torch.tensor(std, dtype=torch.float32, device=device).view(1, -1, 1, 1)",
)


def _q1(
    sequential="5.0 + 2 + 8", overlapped="max(5.0, 2.0, 8.0)", busy="100 * 8 / (5 + 2 + 8)"
) -> str:
    return f"sequential_ms = {sequential}\noverlapped_ms = {overlapped}\ngpu_busy_percent = {busy}"


def _q3(
    float32_mb="256 * 3 * 224 * 224 * 4 / 10**6",
    uint8_mb="256 * 3 * 224 * 224 / 10**6",
    per_ms="25e9 / 1e6 / 1e3",
) -> str:
    return (
        f"float32_mb = {float32_mb}\nuint8_mb = {uint8_mb}\n"
        f"float32_ms = float32_mb / ({per_ms})\nuint8_ms = uint8_mb / ({per_ms})"
    )


MISTAKES: dict[str, Mistake] = {
    "overlapped_as_sum": Mistake(
        "overlapped stages counted one after another: the sum",
        {"q1_overlap": _q1(overlapped="5.0 + 2 + 8")},
        ("test_q1_times",),
        "the stages run side by side",
    ),
    "busy_counts_the_copy": Mistake(
        "the copy counted as the GPU busy, 66.7 % (review 68: the question now says it does not "
        "count)",
        {"q1_overlap": _q1(busy="100 * (2 + 8) / (5 + 2 + 8)")},
        ("test_q1_busy",),
        "the copy, which its copy engine makes, does not count here",
    ),
    "busy_as_fraction": Mistake(
        "the GPU's busy share given as a fraction, 0.533",
        {"q1_overlap": _q1(busy="8 / (5 + 2 + 8)")},
        ("test_q1_busy",),
        "give a percentage (multiply by 100)",
    ),
    "busy_when_overlapped": Mistake(
        "the busy share of the overlapped pipeline, 100%",
        {"q1_overlap": _q1(busy="100.0")},
        ("test_q1_busy",),
        "the question asks one after another",
    ),
    "busy_as_waiting": Mistake(
        "the share of time the GPU waits",
        {"q1_overlap": _q1(busy="100 * (5 + 2) / (5 + 2 + 8)")},
        ("test_q1_busy",),
        "that is the share of the time the GPU waits",
    ),
    "workers_halve_the_batch": Mistake(
        "two workers halve the time per batch: 6 ms, with the GPU still taking 8",
        {"q2_workers": "one_worker_ms = 12.0\ntwo_workers_ms = 12 / 2\nfewest_workers = 2"},
        ("test_q2_times",),
        "the GPU still needs its own time",
    ),
    "sum_with_workers": Mistake(
        "the overlapped stages summed: 22 and 16 ms",
        {
            "q2_workers": "one_worker_ms = 12.0 + 2 + 8\ntwo_workers_ms = 6.0 + 2 + 8\nfewest_workers = 2"
        },
        ("test_q2_times",),
        "the slowest one sets the pace, not their sum",
    ),
    "fewest_a_hair_off": Mistake(
        "a count of workers a hair off a whole number (2.0000001 was within the hidden test's "
        "relative 1e-6)",
        {"q2_workers": "one_worker_ms = 12.0\ntwo_workers_ms = 8.0\nfewest_workers = 2.0000001"},
        ("test_q2_form", "test_q2_fewest"),
        "should be a whole number of workers",
    ),
    "fewest_rounded_down": Mistake(
        "12 / 8 rounded down: 1 worker",
        {"q2_workers": "one_worker_ms = 12.0\ntwo_workers_ms = 8.0\nfewest_workers = 12 // 8"},
        ("test_q2_fewest",),
        "with one worker, loading is still the slowest stage",
    ),
    "mib": Mistake(
        "sizes in MiB (2**20 bytes): 147.0 and 36.75",
        {
            "q3_bytes": _q3(
                float32_mb="256 * 3 * 224 * 224 * 4 / 2**20",
                uint8_mb="256 * 3 * 224 * 224 / 2**20",
                per_ms="25e9 / 2**20 / 1e3",
            )
        },
        ("test_q3_sizes",),
        "that is in MiB",
    ),
    "four_bytes_forgotten": Mistake(
        "float32 counted at 1 byte a number, as uint8",
        {"q3_bytes": _q3(float32_mb="256 * 3 * 224 * 224 / 10**6")},
        ("test_q3_sizes", "test_q3_times"),
        "a float32 number takes 4 bytes",
    ),
    "channels_forgotten": Mistake(
        "one number per pixel, not three",
        {
            "q3_bytes": _q3(
                float32_mb="256 * 224 * 224 * 4 / 10**6", uint8_mb="256 * 224 * 224 / 10**6"
            )
        },
        ("test_q3_sizes", "test_q3_times"),
        "three numbers per pixel",
    ),
    "bits": Mistake(
        "the link's GB/s taken as gigabits: times 8 times too long",
        {"q3_bytes": _q3(per_ms="25e9 / 8 / 1e6 / 1e3")},
        ("test_q3_times",),
        "GB/s counts bytes, not bits",
    ),
    "seconds": Mistake(
        "copy times in seconds, not milliseconds",
        {"q3_bytes": _q3(per_ms="25e9 / 1e6")},
        ("test_q3_form", "test_q3_times"),
        "not a plausible number of ms",
    ),
    "rounded_to_whole_numbers": Mistake(
        "53.3 % and 38.5 MB rounded to whole numbers, 53 and 39: further than the 3 figures "
        "asked (the visible tests pass a whole number with a note; the hidden tests know the value)",
        {
            "q1_overlap": _q1(busy="53"),
            "q3_bytes": "float32_mb = 154.14\nuint8_mb = 39\nfloat32_ms = 6.17\nuint8_ms = 1.54",
        },
        ("test_q1_busy", "test_q3_sizes"),
        "close, but not to the precision asked",
    ),
    "rounded_wrongly_past_three_figures": Mistake(
        "53.3 % and 154.14 MB given with a wrong last figure, 53.38 and 154.6: each within half "
        "a unit of the third figure of the exact value, but not rounded correctly (review 60)",
        {
            "q1_overlap": _q1(busy="53.38"),
            "q3_bytes": "float32_mb = 154.6\nuint8_mb = 38.535\nfloat32_ms = 6.17\nuint8_ms = 1.54",
        },
        ("test_q1_busy", "test_q3_sizes"),
        "close, but not to the precision asked",
    ),
    "always_the_sum": Mistake(
        "steady_state sums the stages even when they overlap",
        {"q4_steady_state": _q4(ms="ms = load + copy + compute")},
        ("test_q4_overlapped", "test_q4_workers"),
        "the slowest one sets the pace, not their sum",
    ),
    "always_the_slowest": Mistake(
        "steady_state takes the slowest stage even when the main process loads, one after another",
        {"q4_steady_state": _q4(ms="ms = max(load, copy, compute)")},
        ("test_q4_sequential", "test_q4_workers"),
        "a batch takes the sum of the stages",
    ),
    "workers_ignored": Mistake(
        "steady_state lets one worker load every batch, whatever the workers",
        {"q4_steady_state": _q4(per_batch=PER_BATCH.replace(" / max(workers, 1)", ""))},
        ("test_q4_workers", "test_q4_bottleneck"),
        "together they deliver one every load / workers ms",
    ),
    "workers_multiply": Mistake(
        "steady_state multiplies the loading time by the workers",
        {"q4_steady_state": _q4(per_batch=PER_BATCH.replace("/ max(workers", "* max(workers"))},
        ("test_q4_workers", "test_q4_bottleneck"),
        "more workers deliver batches more often",
    ),
    "workers_share_rounded": Mistake(
        "steady_state rounds each worker's share of the loading down to a whole ms (review 57: "
        "every case divided evenly, and floor, int() or ceil scored full marks)",
        {"q4_steady_state": _q4(per_batch=PER_BATCH.replace("/ max(workers", "// max(workers"))},
        ("test_q4_workers",),
        "a fraction of a millisecond included: do not round it",
    ),
    "sum_with_workers_on_one_stream": Mistake(
        "steady_state sums the stages whenever the copy is not overlapped, workers or not "
        "(the exercise's old model, which contradicted the lesson's Pipeline)",
        {
            "q4_steady_state": _q4(
                ms="ms = max(load, copy, compute) if workers and overlap else load + copy + compute"
            )
        },
        ("test_q4_workers",),
        "loading runs in the background while the GPU copies and computes earlier batches",
    ),
    "copy_always_overlaps": Mistake(
        "steady_state lets the copy overlap the step without pinned memory and a side stream",
        {
            "q4_steady_state": _q4(
                ms="ms = load + copy + compute if workers == 0 else max(load, copy, compute)"
            )
        },
        ("test_q4_workers",),
        "the copy and the step run one after the other on one stream",
    ),
    "fastest_stage": Mistake(
        "the bottleneck taken as the fastest stage",
        {"q4_steady_state": _q4(bottleneck="bottleneck = min(per_batch, key=per_batch.get)")},
        ("test_q4_bottleneck",),
        "the bottleneck is the slowest stage",
    ),
    "not_scaled": Mistake(
        "to_device_uint8 normalizes the 0-255 values without dividing by 255",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device)", *MEAN_STD, "return (x.float() - mean) / std"
            )
        },
        ("test_q5_values",),
        "divide the uint8 values by 255",
    ),
    "mean_and_std_swapped": Mistake(
        "to_device_uint8 subtracts the std and divides by the mean",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device)", *MEAN_STD, "return (x.float() / 255 - std) / mean"
            )
        },
        ("test_q5_values",),
        "subtract the mean, then divide by the std",
    ),
    "mean_on_the_cpu": Mistake(
        "to_device_uint8 makes mean and std on the CPU: the device error",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device)",
                *(line.replace(", device=device", "") for line in MEAN_STD),
                "return (x.float() / 255 - mean) / std",
            )
        },
        ("test_q5_devices",),
        "make mean and std on the device",
    ),
    "float64": Mistake(
        "to_device_uint8 makes mean and std float64: the batch comes back float64",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device)",
                *(line.replace("torch.float32", "torch.float64") for line in MEAN_STD),
                "return (x.float() / 255 - mean) / std",
            )
        },
        ("test_q5_form", "test_q5_devices"),
        "the result should be float32",
    ),
    "not_broadcast": Mistake(
        "to_device_uint8 keeps mean and std flat: they meet the images' width, not their channels",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device)",
                *(line.replace(".view(1, -1, 1, 1)", "") for line in MEAN_STD),
                "return (x.float() / 255 - mean) / std",
            )
        },
        ("test_q5_form", "test_q5_values", "test_q5_devices"),
        "shape them (1, C, 1, 1)",
    ),
    "normalized_on_the_cpu": Mistake(
        "to_device_uint8 normalizes on the CPU, then copies float32: the misconception of question 5",
        {
            "q5_to_device_uint8": _to_device(
                *(line.replace(", device=device", "") for line in MEAN_STD),
                "return ((images.float() / 255 - mean) / std).to(device)",
            )
        },
        ("test_q5_devices",),
        "on the CPU before the copy: four times the bytes crossed the link",
    ),
    "converts_in_the_copy": Mistake(
        "to_device_uint8 converts in the copy itself, images.to(device, torch.float32): the CPU converts",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device, torch.float32)", *MEAN_STD, "return (x / 255 - mean) / std"
            )
        },
        ("test_q5_devices",),
        "the copy itself converted the images to float32",
    ),
    "hardcodes_cuda": Mistake(
        'to_device_uint8 copies to "cuda" instead of the device it is given (no GPU here)',
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to('cuda')",
                *(line.replace("device=device", "device='cuda'") for line in MEAN_STD),
                "return (x.float() / 255 - mean) / std",
            )
        },
        ("test_q5_form", "test_q5_values", "test_q5_devices"),
        "this computer has none",
    ),
    "decoy_uint8_copy": Mistake(
        "to_device_uint8 copies a uint8 batch it throws away, and converts to float32 on the "
        "CPU what it really copies (one element more, to slip past a filter; an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                "images.to(device)",
                "wide = torch.cat([images.reshape(-1).float(), torch.zeros(1)])",
                "x = wide.to(device)[:-1].reshape(images.shape)",
                *MEAN_STD,
                "return (x / 255 - mean) / std",
            )
        },
        ("test_q5_devices",),
        "crossed from the CPU for a batch of",
    ),
    "float_list_to_device": Mistake(
        "to_device_uint8 makes the float32 batch on the device from a list of its values "
        "(torch.tensor(list, device=...) copies without an op a dispatch mode sees; an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                "x = torch.tensor(images.float().tolist(), device=device)",
                *MEAN_STD,
                "return (x / 255 - mean) / std",
            )
        },
        ("test_q5_devices",),
        "converted to float32 on the CPU",
    ),
    "float32_from_a_thread": Mistake(
        "to_device_uint8 copies the uint8 batch, and sends the float32 batch it normalized on "
        "the CPU from a 'prefetch' thread (an outside attack)",
        {
            "q5_to_device_uint8": "import threading\n\n\n"
            + _to_device(
                "images.to(device)",
                "m = torch.tensor(mean).view(1, -1, 1, 1)",
                "s = torch.tensor(std).view(1, -1, 1, 1)",
                "done = {}",
                "prefetch = threading.Thread(target=lambda: done.setdefault('x', ("
                "(images.float() / 255 - m) / s).to(device)))",
                "prefetch.start()",
                "prefetch.join()",
                "return done['x']",
            )
        },
        ("test_q5_devices",),
        "converted to float32 on the CPU",
    ),
    "float32_through_save_and_load": Mistake(
        "to_device_uint8 normalizes on the CPU and moves the float32 batch with torch.save and "
        "torch.load(map_location=device) (an outside attack)",
        {
            "q5_to_device_uint8": "import io\n\n\n"
            + _to_device(
                "m = torch.tensor(mean).view(1, -1, 1, 1)",
                "s = torch.tensor(std).view(1, -1, 1, 1)",
                "x = (images.float() / 255 - m) / s",
                "buffer = io.BytesIO()",
                "torch.save(x, buffer)",
                "buffer.seek(0)",
                "return torch.load(buffer, map_location=device)",
            )
        },
        ("test_q5_devices",),
        "converted to float32 on the CPU",
    ),
    "float32_image_by_image": Mistake(
        "to_device_uint8 normalizes each image on the CPU and copies them one by one as float32",
        {
            "q5_to_device_uint8": _to_device(
                *(line.replace(", device=device", "") for line in MEAN_STD),
                "return torch.stack([((i.float() / 255 - mean[0]) / std[0]).to(device) for i in images])",
            )
        },
        ("test_q5_devices",),
        "crossed from the CPU for a batch of",
    ),
    "float16_in_pieces_beside_a_decoy": Mistake(
        "to_device_uint8 copies a uint8 batch it throws away and sends the batch as float16 in "
        "two halves, so no wide copy has the batch's size (an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                "images.to(device)",
                "flat = images.reshape(-1).half()",
                "half = flat.numel() // 2",
                "x = torch.cat([flat[:half].to(device), flat[half:].to(device)])",
                *MEAN_STD,
                "return (x.float().reshape(images.shape) / 255 - mean) / std",
            )
        },
        ("test_q5_devices",),
        "crossed from the CPU for a batch of",
    ),
    "one_channel_as_float32": Mistake(
        "to_device_uint8 copies the batch as uint8, but one image's first channel, converted on "
        "the CPU, crosses as float32 too: fewer bytes than mean and std may take (an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                "x = images.to(device).float() / 255",
                "x[0, 0] = (images[0, 0].float() / 255).to(device)",
                *MEAN_STD,
                "return (x - mean) / std",
            )
        },
        ("test_q5_devices",),
        "more than mean and std hold",
    ),
    "normalized_on_the_cpu_beside_a_decoy": Mistake(
        "to_device_uint8 normalizes on the CPU, copies a uint8 batch it throws away and returns "
        "a tensor of the right form with no values on any other device (an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                *(line.replace(", device=device", "") for line in MEAN_STD),
                "result = (images.float() / 255 - mean) / std",
                'if torch.device(device).type == "cpu":',
                "    return result",
                "images.to(device)",
                "return torch.empty(result.shape, dtype=torch.float32, device=device)",
            )
        },
        ("test_q5_devices",),
        "was not computed from the uint8 images copied to the device",
    ),
    "empty_like_the_copy": Mistake(
        "to_device_uint8 copies the uint8 batch and returns a float32 batch with no values, "
        "made like it (torch.empty_like: only its shape; an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                "return torch.empty_like(images.to(device), dtype=torch.float32)",
            )
        },
        ("test_q5_values", "test_q5_devices"),
        "was not computed from the uint8 images copied to the device",
    ),
    "float32_through_serialization_load": Mistake(
        "to_device_uint8 normalizes on the CPU and sends the float32 batch by "
        "torch.serialization.load, torch.load under another name (an outside attack)",
        {
            "q5_to_device_uint8": "import io\n\n\n"
            + _to_device(
                *(line.replace(", device=device", "") for line in MEAN_STD),
                "buffer = io.BytesIO()",
                "torch.save((images.float() / 255 - mean) / std, buffer)",
                "buffer.seek(0)",
                "floats = torch.serialization.load(buffer, map_location=device)",
                "return floats + images.to(device).float() * 0",
            )
        },
        ("test_q5_devices",),
        "converted to float32 on the CPU",
    ),
    "uint8_batch_copied_twice": Mistake(
        "to_device_uint8 copies the uint8 batch to the device twice (twice the bytes on the link)",
        {
            "q5_to_device_uint8": _to_device(
                "images.to(device)",
                "x = images.to(device)",
                *MEAN_STD,
                "return (x.float() / 255 - mean) / std",
            )
        },
        ("test_q5_devices",),
        "crossed from the CPU for a batch of",
    ),
    "float32_by_new_tensor_beside_a_decoy": Mistake(
        "to_device_uint8 copies a uint8 batch it throws away and makes the float32 batch on the "
        "device with images.new_tensor(list, device=...) (an outside attack)",
        {
            "q5_to_device_uint8": _to_device(
                "images.to(device)",
                "x = images.new_tensor(images.float().tolist(), dtype=torch.float32, device=device)",
                *MEAN_STD,
                "return (x / 255 - mean) / std",
            )
        },
        ("test_q5_devices",),
        "converted to float32 on the CPU",
    ),
    "float32_by_legacy_new_tied_to_the_uint8_copy": Mistake(
        "to_device_uint8 normalizes on the CPU, makes the float32 batch on the device with the "
        "legacy images.new(list), and copies the uint8 batch into spare bytes of the result's "
        "own buffer (a thirteenth outside attack: 26/26)",
        {
            "q5_to_device_uint8": _to_device(
                "m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)",
                "s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)",
                "out = (images.float() / 255 - m) / s",
                "if torch.device(device).type == 'cpu':",
                "    return out",
                "n = images.numel()",
                "flat = torch.empty(0, device=device).new(out.reshape(-1).tolist())",
                "buffer = torch.empty(n + (n + 3) // 4, device=device)",
                "buffer[:n] = flat",
                "buffer[n:].view(torch.uint8)[:n].copy_(images.reshape(-1))",
                "return buffer[:n].view(images.shape)",
            )
        },
        ("test_q5_devices",),
        "converted to float32 on the CPU",
    ),
    "float32_storage_as_a_uint8_view": Mistake(
        "to_device_uint8 normalizes on the CPU and loads a uint8 view of the float32 storage "
        "onto the device (the whole storage crosses; an outside attack)",
        {
            "q5_to_device_uint8": "import io\n\n\n"
            + _to_device(
                "m = torch.tensor(mean).view(1, -1, 1, 1)",
                "s = torch.tensor(std).view(1, -1, 1, 1)",
                "x = (images.float() / 255 - m) / s",
                "view = x.view(torch.uint8).view(-1)[: images.numel()].view(images.shape)",
                "buffer = io.BytesIO()",
                "torch.save(view, buffer)",
                "buffer.seek(0)",
                "moved = torch.load(buffer, map_location=device)",
                "out = torch.empty(0, dtype=torch.float32, device=device)",
                "return out.set_(moved.untyped_storage(), 0, images.shape, x.stride())",
            )
        },
        ("test_q5_devices",),
        "crossed from the CPU for a batch of",
    ),
}

# Other right ways to answer: each earns every point.
FULL_MARKS: dict[str, dict[str, str]] = {
    "other_right_answers": {
        **SOLUTIONS,
        # Whole numbers as Python's exact arithmetic makes them, ints (max(12 / 2, 2, 8) is
        # the int 8: a fresh review's right answers had lost the visible test's point), the
        # rest typed to 3 significant figures or more.
        # gpu_busy_percent rounded in float32, as NumPy keeps it: 53.33000183105469 gives 53.33.
        "q1_overlap": "sequential_ms = 5 + 2 + 8\noverlapped_ms = max(5, 2, 8)\n"
        "gpu_busy_percent = np.round(np.float32(100 * 8 / 15), 2)",
        # fewest_workers a float that is a whole number (the hidden test is exact: 2.0 is 2).
        "q2_workers": "one_worker_ms = 12\ntwo_workers_ms = max(12 / 2, 2, 8)\nfewest_workers = 12 / 6",
        # uint8_ms worked out from uint8_mb rounded to 4 figures (review 62): right to 3.
        "q3_bytes": "float32_mb = 154\nuint8_mb = 38.54\nfloat32_ms = 6.17\nuint8_ms = uint8_mb / 25",
        # A list back instead of a tuple; the stages' times sorted by hand; the loading share
        # given to 3 significant figures, as the notebook's precision rule allows (25 / 3 ms:
        # 8.33).
        "q4_steady_state": _steady_state(
            "share = float(f\"{stage_ms['load'] / (workers or 1):.3g}\")",
            'times = [("load", share), ("copy", stage_ms["copy"]),',
            '         ("compute", stage_ms["compute"])]',
            "name, slowest = sorted(times, key=lambda pair: pair[1])[-1]",
            "if not workers:",
            "    return [sum(t for _, t in times), name]",
            'gpu = stage_ms["copy"] + stage_ms["compute"]',
            "if overlap or gpu < times[0][1]:",
            "    return [slowest, name]",
            'return [gpu, "copy + compute"]',
        ),
        # Mean and std built from one tensor, reshaped with [None, :, None, None]; the batch
        # pinned for a copy that does not block, as the lesson shows it (the
        # grader has no GPU, where pin_memory() raises: an outside attack's right answer lost
        # all of question 5 to it).
        "q5_to_device_uint8": _to_device(
            "stats = torch.tensor([mean, std], device=device)",
            "m, s = stats[0][None, :, None, None], stats[1][None, :, None, None]",
            "pinned = images.pin_memory()",
            "return pinned.to(device, non_blocking=True).to(torch.float32).div(255).sub(m).div(s)",
        ),
    },
}

# uint8 copied image by image, converted on the device: what question 5 asks, in pieces (an
# outside attack's right answer lost question 5's copy test, which wanted one batch-sized copy).
FULL_MARKS["copies_image_by_image"] = {
    **SOLUTIONS,
    "q5_to_device_uint8": _to_device(
        *MEAN_STD,
        "x = torch.stack([image.to(device) for image in images])",
        "return (x.float() / 255 - mean) / std",
    ),
}

FULL_MARKS["copies_image_by_image_with_float64_stats"] = {
    # Mean and std made again for each image, from NumPy's float64: wasteful, but only a
    # few numbers a channel cross in a wider dtype; the images cross as uint8 (an outside
    # attack's right answer lost 2 points).
    **SOLUTIONS,
    "q5_to_device_uint8": "import numpy as np\n\n\n"
    + _to_device(
        "out = []",
        "for image in images:",
        "    image = image.to(device)",
        "    m = torch.as_tensor(np.asarray(mean), device=device).view(-1, 1, 1)",
        "    s = torch.as_tensor(np.asarray(std), device=device).view(-1, 1, 1)",
        "    out.append(((image.float() / 255 - m) / s).float())",
        "return torch.stack(out)",
    ),
}

# Every name the checks and tests use (numbers, math, np, torch, F, check...) is the learner's.
FULL_MARKS["fills_a_buffer_channel_by_channel"] = {
    # Each channel normalized on the device, with Python numbers, into a buffer made once:
    # a write through a view (an eleventh outside attack's right answer had lost 2 points).
    **SOLUTIONS,
    "q5_to_device_uint8": _to_device(
        "x = images.to(device)",
        "out = torch.empty(x.shape, dtype=torch.float32, device=device)",
        "for c in range(x.shape[1]):",
        "    out[:, c] = (x[:, c].float() / 255 - mean[c]) / std[c]",
        "return out",
    ),
}

FULL_MARKS["rebinds_every_public_name"] = kit.rebinding_every_public_name(SOLUTIONS, SOURCE)


def _always_equal(number: str, pair: str, tensor: str) -> dict[str, str]:
    return {
        "q1_overlap": kit.LIARS + f"\nsequential_ms = overlapped_ms = gpu_busy_percent = {number}",
        "q2_workers": f"one_worker_ms = two_workers_ms = fewest_workers = {number}",
        "q3_bytes": f"float32_mb = uint8_mb = float32_ms = uint8_ms = {number}",
        "q4_steady_state": _steady_state(f"return {pair}"),
        "q5_to_device_uint8": _to_device(f"return {tensor}"),
    }


ALWAYS_EQUAL: dict[str, dict[str, str]] = {
    # Each answer a subclass of its own type.
    "always_equal_subclasses": _always_equal(
        "LyingFloat(1.5)",
        "LyingTuple((LyingFloat(1.5), LyingStr('load')))",
        "torch.zeros(4, 3, 5, 7).as_subclass(LyingTensor)",
    ),
    # Every answer, and every function's result, one object whose __eq__ returns True.
    "always_equal_objects": _always_equal("Anything()", "Anything()", "Anything()"),
}
ALWAYS_EQUAL_MAX = 0.1 * TOTAL

# One implausible answer per answer cell: each visible test must refuse it with a message.
IMPLAUSIBLE: dict[str, str] = {
    "q1_overlap": "sequential_ms = '15 ms'\noverlapped_ms = 8\ngpu_busy_percent = 150",
    "q2_workers": "one_worker_ms = 12\ntwo_workers_ms = 8\nfewest_workers = 1.5",
    "q3_bytes": "float32_mb = 154_140_672\nuint8_mb = 38.5\nfloat32_ms = 6.17\nuint8_ms = 1.54",
    "q4_steady_state": _steady_state("return 8.0"),
    "q5_to_device_uint8": _to_device("return images"),
}

# The mistakes that course-grade's own test grades for this unit (tests/course/test_course_grade_units.py):
# a handful, chosen for what they send across its bridge between the two kernels (a dict and
# bools in, a pair back; a uint8 tensor in, a float tensor on meta back; the device error;
# the record of what crossed to the device, made in the student's kernel).
COURSE_GRADE_SAMPLE = (
    "decoy_uint8_copy",
    "float_list_to_device",
    "float32_from_a_thread",
    "workers_ignored",
    "mean_on_the_cpu",
    "busy_as_fraction",
    "normalized_on_the_cpu",
    "fewest_a_hair_off",  # a count a hair off a whole number (outside attack 63)
)

# Tampered submissions: a learner with a mistake who also tries to dodge the failing test,
# by deleting it, or by replacing test cells with `pass`.
DELETED = ("deleted_test_cell", "mean_on_the_cpu", "test_q5_devices")
PASSED = ("pass_in_test_cells", "four_bytes_forgotten", ("test_q3_sizes", "test_q3_times"))


make_submission, expected_score = kit.unit_functions(RELEASE, SOLUTIONS, TOTAL)
