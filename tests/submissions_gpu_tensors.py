"""Realistic submissions of the gpu_tensors exercises, built from the committed release.

The API is every unit's (see tests/submission_kit.py, which holds the shared code;
tests/units.py finds a unit's module); gpu_tensors also has ``SEED_ROUNDED``, the
solutions with the seed's own rounded answers typed in (0.79 MB, 0.48 ms, 0.98 ms, as
the lesson prints them): full marks.

Example, a class of submissions::

    from tests.submissions_gpu_tensors import RELEASE, SOLUTIONS, MISTAKES, make_submission
    notebooks = {"ada": make_submission(RELEASE, SOLUTIONS)}
    notebooks |= {name: make_submission(RELEASE, m.answers) for name, m in MISTAKES.items()}
"""

from __future__ import annotations

from tests import submission_kit as kit

ASSIGNMENT = "gpu_tensors"


# The answers to the seed's own questions, as they would be printed. None of them may
# appear in the release, in a visible test, or in a failure message.
ANSWER_VALUES: tuple[str, ...] = (
    "0.786432",
    "786432",  # question 2: MB, and bytes
    "96",
    "83",
    "64",
    "82",  # question 3: ticks at 3 and 2 steps
    "0.48",
    "0.976",  # worked example: copy and GPU route, ms
)


ROOT = kit.ROOT
without_cell, with_cell_source = kit.without_cell, kit.with_cell_source
SOURCE, RELEASE, SOLUTIONS, POINTS, TOTAL, Mistake, answer_values_in = kit.unit(
    ASSIGNMENT, ANSWER_VALUES, __name__
)


MISTAKES: dict[str, Mistake] = {
    "mib": Mistake(
        "megabytes counted as MiB (2**20 bytes), 0.75",
        {
            "q2_mb": "q2_mb = 16 * 4096 * 3 * 4 / 2**20",
            "q2_size_mb": "def size_mb(shape, dtype):\n    return math.prod(shape) * dtype.itemsize / 2**20",
        },
        ("test_q2_mb", "test_q2_size_mb"),
        "that is in MiB",
    ),
    "float64_bytes": Mistake(
        "8 bytes per float32 number, 1.572864",
        {"q2_mb": "q2_mb = 16 * 4096 * 3 * 8 / 1_000_000"},
        ("test_q2_mb",),
        "that counts 8 bytes per number",
    ),
    "bits": Mistake(
        "bits instead of bytes",
        {
            "q2_mb": "q2_mb = 16 * 4096 * 3 * 32 / 1_000_000",
            "q2_size_mb": "def size_mb(shape, dtype):\n    return math.prod(shape) * dtype.itemsize * 8 / 1e6",
        },
        ("test_q2_mb", "test_q2_size_mb"),
        "that counts bits",
    ),
    "ignores_dtype": Mistake(
        "size_mb counts 4 bytes whatever the dtype",
        {"q2_size_mb": "def size_mb(shape, dtype):\n    return math.prod(shape) * 4 / 1e6"},
        ("test_q2_size_mb",),
        "use dtype.itemsize",
    ),
    "one_copy": Mistake(
        "the race counts one copy instead of two, 43",
        {
            "q3_ticks": "cpu_ticks_3 = 96\ngpu_ticks_3 = 43\nwinner_3 = 'GPU'\ncpu_ticks_2 = 64\ngpu_ticks_2 = 42",
            "q3_race_ticks": (
                "def race_ticks(steps, numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
                "    cpu = steps * math.ceil(numbers / cpu_per_tick)\n"
                "    return cpu, copy_ticks + steps * math.ceil(numbers / gpu_per_tick)"
            ),
            "q3_fewest_gpu_steps": (
                "def fewest_gpu_steps(numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
                "    steps = 1\n"
                "    while steps * math.ceil(numbers / cpu_per_tick) <= copy_ticks + steps * math.ceil(numbers / gpu_per_tick):\n"
                "        if math.ceil(numbers / gpu_per_tick) >= math.ceil(numbers / cpu_per_tick):\n"
                "            return None\n"
                "        steps += 1\n"
                "    return steps"
            ),
        },
        ("test_q3_ticks", "test_q3_race_ticks", "test_q3_fewest"),
        "that counts one copy",
    ),
    "never_only_on_a_tie": Mistake(
        "fewest_gpu_steps says None only when the GPU takes exactly as many ticks a step, and "
        "gives a number for a GPU slower per step (review 58: the one never-wins case was a tie)",
        {
            "q3_fewest_gpu_steps": (
                "def fewest_gpu_steps(numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
                "    gain = math.ceil(numbers / cpu_per_tick) - math.ceil(numbers / gpu_per_tick)\n"
                "    if gain == 0:\n"
                "        return None\n"
                "    return 2 * copy_ticks // gain + 1"
            ),
        },
        ("test_q3_fewest",),
        "never catches up",
    ),
    "search_stops_early": Mistake(
        "fewest_gpu_steps searches the first 99 steps and says None past them (review 75: the "
        "largest answer the tests asked for was 7)",
        {
            "q3_fewest_gpu_steps": (
                "def fewest_gpu_steps(numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
                "    for steps in range(1, 100):\n"
                "        cpu, gpu = race_ticks(steps, numbers, cpu_per_tick, gpu_per_tick, copy_ticks)\n"
                "        if gpu < cpu:\n"
                "            return steps\n"
                "    return None"
            ),
        },
        ("test_q3_fewest",),
        "a search must not stop before it does",
    ),
    "no_copy_back": Mistake(
        "the worked example's GPU route forgets the copy back",
        {
            "q4_worked_example": (
                "copy_ms = 12 / 25\ngpu_route_ms = copy_ms + 24 / 1500\nverdict = 'CPU'"
            )
        },
        ("test_q4_gpu_route",),
        "that forgets the copy back",
    ),
    "seconds": Mistake(
        "the worked example in seconds instead of ms",
        {
            "q4_worked_example": (
                "copy_ms = 12e6 / 25e9\ngpu_route_ms = 2 * copy_ms + 24e6 / 1500e9\nverdict = 'CPU'"
            )
        },
        ("test_q4_copy_ms", "test_q4_gpu_route"),
        "that looks like seconds",
    ),
    "empty_of_the_right_form": Mistake(
        "prepare_batch returns a new empty tensor of the batch's shape, on the model's device "
        "and in its dtype, without the batch's numbers (an outside attack)",
        {
            "q1_prepare_batch": (
                "def prepare_batch(batch, model):\n    weights = next(model.parameters())\n"
                "    return torch.empty(batch.shape, dtype=weights.dtype, device=weights.device)"
            )
        },
        ("test_q1_device", "test_q1_dtype", "test_q1_unchanged"),
        "the batch's own numbers",
    ),
    "device_only": Mistake(
        "prepare_batch fixes the device but not the dtype (the second problem)",
        {
            "q1_prepare_batch": (
                "def prepare_batch(batch, model):\n    return batch.to(next(model.parameters()).device)"
            )
        },
        ("test_q1_dtype",),
        "the batch kept its own dtype",
    ),
    "always_float32": Mistake(
        "prepare_batch converts to float32 whatever the model's dtype",
        {
            "q1_prepare_batch": (
                "def prepare_batch(batch, model):\n    return batch.float().to(next(model.parameters()).device)"
            )
        },
        ("test_q1_dtype",),
        "the batch became float32, but this model",
    ),
    "mutates_batch": Mistake(
        "prepare_batch converts the learner's batch in place",
        {
            "q1_prepare_batch": (
                "def prepare_batch(batch, model):\n"
                "    weights = next(model.parameters())\n"
                "    batch.data = batch.data.to(weights.dtype)\n"
                "    return batch.to(weights.device)"
            )
        },
        ("test_q1_unchanged",),
        "changed the batch it was given",
    ),
    "bytes": Mistake(
        "the size in bytes, not MB (786432)",
        {
            "q2_mb": "q2_mb = 16 * 4096 * 3 * 4",
            "q2_size_mb": "def size_mb(shape, dtype):\n    return math.prod(shape) * dtype.itemsize",
        },
        ("test_q2_mb_form", "test_q2_mb", "test_q2_size_mb_form", "test_q2_size_mb"),
        "looks like a number of bytes",
    ),
    "over_rounded": Mistake(
        'rounded further than asked: the seed\'s "≈0.5 ms" and "about 1 ms", and 0.8 MB',
        {
            "q2_mb": "q2_mb = 0.8",
            "q4_worked_example": "copy_ms = 0.5\ngpu_route_ms = 1\nverdict = 'CPU'",
        },
        (
            "test_q2_mb_form",
            "test_q2_mb",
            "test_q4_worked_example_form",
            "test_q4_copy_ms",
            "test_q4_gpu_route",
        ),
        "significant figure",
    ),
    "hardcodes_cuda": Mistake(
        'prepare_batch writes "cuda" instead of reading the model\'s device (no GPU here)',
        {
            "q1_prepare_batch": (
                "def prepare_batch(batch, model):\n    return batch.float().to('cuda')"
            )
        },
        ("test_q1_shape", "test_q1_device", "test_q1_dtype", "test_q1_unchanged"),
        "this computer has none",
    ),
    "from_numpy_float32": Mistake(
        "believes torch.from_numpy makes float32",
        {
            "q1_second_problem": "second_problem = 'C'",
            "q4_dtypes": "x_dtype = torch.float32\ny_dtype = torch.float32",
        },
        ("test_q1_second_problem", "test_q4_dtypes"),
        "torch.from_numpy keeps",
    ),
}


# The seed's own rounded answers, and the lesson's printed 0.98 ms: the exercises ask for
# two significant figures, so they earn every point.
SEED_ROUNDED: dict[str, str] = {
    **SOLUTIONS,
    "q2_mb": "q2_mb = 0.79",
    "q4_worked_example": "copy_ms = 0.48\ngpu_route_ms = 0.98\nverdict = 'CPU'",
}


def _always_equal(
    make: str, fn_result: str, *, text: str, integer: str, dtype: str, pair: str
) -> dict[str, str]:
    first = kit.LIARS + "\n\ndef prepare_batch(batch, model):\n    return " + make
    return {
        "q1_prepare_batch": first,
        "q1_second_problem": f"second_problem = {text}",
        "q2_mb": f"q2_mb = {fn_result}",
        "q2_size_mb": f"def size_mb(shape, dtype):\n    return {fn_result}",
        "q3_ticks": "\n".join(
            [
                f"cpu_ticks_3 = {integer}",
                f"gpu_ticks_3 = {integer}",
                f"winner_3 = {text}",
                f"cpu_ticks_2 = {integer}",
                f"gpu_ticks_2 = {integer}",
            ]
        ),
        "q3_race_ticks": f"def race_ticks(steps, *args, **kwargs):\n    return {pair}",
        "q3_fewest_gpu_steps": f"def fewest_gpu_steps(*args, **kwargs):\n    return {integer}",
        "q4_dtypes": f"x_dtype = {dtype}\ny_dtype = {dtype}",
        "q4_worked_example": f"copy_ms = {fn_result}\ngpu_route_ms = {fn_result}\nverdict = {text}",
    }


ALWAYS_EQUAL: dict[str, dict[str, str]] = {
    # Each answer a subclass of its own type (a dtype cannot be subclassed).
    "always_equal_subclasses": _always_equal(
        "torch.zeros(0).as_subclass(LyingTensor)",
        "LyingFloat()",
        text="LyingStr()",
        integer="LyingInt()",
        dtype="Anything()",
        pair="LyingTuple((LyingInt(), LyingInt()))",
    ),
    # Every answer, and every function's result, one object whose __eq__ returns True.
    "always_equal_objects": _always_equal(
        "Anything()",
        "Anything()",
        text="Anything()",
        integer="Anything()",
        dtype="Anything()",
        pair="Anything()",
    ),
}
ALWAYS_EQUAL_MAX = 0.1 * TOTAL

FULL_MARKS: dict[str, dict[str, str]] = {
    "seed_rounded": SEED_ROUNDED,
    # Every name the checks and tests use (numbers, math, np, torch, check...) is the learner's.
    "rebinds_every_public_name": kit.rebinding_every_public_name(SOLUTIONS, SOURCE),
}

# race_ticks's pair written as a list (review 75: it lost the 3 points of both its tests),
# and fewest_gpu_steps found by a search that runs until the GPU wins.
FULL_MARKS["pair_as_a_list_and_a_search"] = {
    **SOLUTIONS,
    "q3_race_ticks": (
        "def race_ticks(steps, numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
        "    cpu = steps * -(-numbers // cpu_per_tick)\n"
        "    return [cpu, 2 * copy_ticks + steps * -(-numbers // gpu_per_tick)]"
    ),
    "q3_fewest_gpu_steps": (
        "def fewest_gpu_steps(numbers=256, cpu_per_tick=8, gpu_per_tick=256, copy_ticks=40):\n"
        "    if -(-numbers // gpu_per_tick) >= -(-numbers // cpu_per_tick):\n"
        "        return None\n"
        "    steps = 1\n"
        "    while race_ticks(steps, numbers, cpu_per_tick, gpu_per_tick, copy_ticks)[1] >= "
        "race_ticks(steps, numbers, cpu_per_tick, gpu_per_tick, copy_ticks)[0]:\n"
        "        steps += 1\n"
        "    return steps"
    ),
}

# One implausible answer per answer cell: each visible test must refuse it with a message.
IMPLAUSIBLE: dict[str, str] = {
    "q1_prepare_batch": "def prepare_batch(batch, model):\n    return batch.numpy()",
    "q1_second_problem": "second_problem = 'float64'",
    "q2_mb": "q2_mb = '0.8 MB'",
    "q2_size_mb": "def size_mb(shape, dtype):\n    return 4",
    "q3_ticks": "cpu_ticks_3, gpu_ticks_3, winner_3 = 90.5, 80.5, 'gpu'\ncpu_ticks_2 = gpu_ticks_2 = 0",
    "q3_race_ticks": "def race_ticks(steps, *args, **kwargs):\n    return torch.tensor([steps, steps])",
    "q3_fewest_gpu_steps": "def fewest_gpu_steps(*args, **kwargs):\n    return 2.5",
    "q4_dtypes": "x_dtype, y_dtype = 'float64', 'float32'",
    "q4_worked_example": "copy_ms = gpu_route_ms = -1\nverdict = 'the CPU'",
}

# The mistakes that course-grade's own test grades for this unit (tests/course/test_course_grade_units.py):
# a handful, chosen for what they send across its bridge between the two kernels.
COURSE_GRADE_SAMPLE = ("mib", "mutates_batch")

# Tampered submissions: a learner with a mistake who also tries to dodge the failing test,
# by deleting it, or by replacing test cells with `pass`.
DELETED = ("deleted_test_cell", "float64_bytes", "test_q2_mb")
PASSED = ("pass_in_test_cells", "mib", ("test_q2_mb", "test_q2_size_mb"))


make_submission, expected_score = kit.unit_functions(RELEASE, SOLUTIONS, TOTAL)


FULL_MARKS["a_module_and_a_deprecation_warning"] = {
    # A twelfth outside attack's right answers: a callable nn.Module is a function the tests
    # call (course-grade had sent it as a model, without its forward: 24/30), and a function
    # that makes PyTorch warn (TypedStorage) is right (plain nbgrader counts a test cell's
    # stderr as a failure: 29/30).
    **SOLUTIONS,
    "q1_prepare_batch": (
        "class PrepareBatch(torch.nn.Module):\n"
        "    def forward(self, batch, model):\n"
        "        weights = next(model.parameters())\n"
        "        return batch.to(weights.device, weights.dtype)\n\n\n"
        "prepare_batch = PrepareBatch()"
    ),
    "q2_size_mb": (
        "def size_mb(shape, dtype):\n"
        "    return torch.empty(shape, dtype=dtype).storage().nbytes() / 1_000_000"
    ),
}
