"""Realistic submissions of the gpu_profiling exercises, built from the committed release.

The API is every unit's: see tests/submission_kit.py (tests/units.py finds this module).
"""

from __future__ import annotations

from tests import submission_kit as kit

ASSIGNMENT = "gpu_profiling"

# The answers, as they would be printed. None of them may appear in the release, in a
# visible test, or in a failure message. Question 1's table prints the share as 24.03%, with
# its percent sign (the kit matches 24.03 only as a number of its own: the table's own
# "24.03%" is what the learner reads, and the release must show it). The steps of question 3
# (3, 4 and 5) are numbers every question uses, so they cannot be told apart here.
ANSWER_VALUES: tuple[str, ...] = (
    "24.0",
    "24.032",
    "24.0324",
    "62.5",
    "57.5",
    "36.75",
    "78.5",
    "44.25",
)


ROOT = kit.ROOT
without_cell, with_cell_source = kit.without_cell, kit.with_cell_source
SOURCE, RELEASE, SOLUTIONS, POINTS, TOTAL, Mistake, answer_values_in = kit.unit(
    ASSIGNMENT, ANSWER_VALUES, __name__
)


def _busy(*body: str) -> str:
    return "def gpu_busy_percent(intervals, start, end):\n" + "\n".join(
        f"    {line}" for line in body
    )


def _waits(*body: str) -> str:
    return "def host_waits(events):\n" + "\n".join(f"    {line}" for line in body)


def _profile(*body: str) -> str:
    return "def profile_steps(model, batches, steps):\n" + "\n".join(f"    {line}" for line in body)


def _q1(op='"aten::addmm"', share="100 * 150.452 / 626.037") -> str:
    return f"busiest_op = {op}\nbusiest_self_percent = {share}"


# The solution's merge of the clipped intervals, for mistakes that change one part of it.
GUARD = "if end <= start:\n        return 0.0"
CLIPPED = "clipped = sorted((max(a, start), min(b, end)) for a, b in intervals)"
MERGE = (
    "busy, covered = 0.0, start",
    "for a, b in clipped:",
    "    a = max(a, covered)",
    "    if b > a:",
    "        busy += b - a",
    "        covered = b",
)
PERCENT = "return 100 * busy / (end - start)"


def _q2(guard=GUARD, clipped=CLIPPED, merge=MERGE, percent=PERCENT) -> str:
    return _busy(guard, clipped, *merge, percent)


# host_waits, written plainly: the copies from the device to the host (correlation -> the
# GPU-side copy's name), then the calls: a cudaMemcpy from the device, a cudaMemcpyAsync
# into pageable memory.
PAGEABLE = "'Memcpy DtoH (Device -> Pageable)'"
TO_HOST = (
    "to_host = {e['args']['correlation']: e['name'] for e in events if e.get('cat') == 'gpu_memcpy'",
    "           and e.get('name', '').startswith('Memcpy DtoH')}",
)
SYNCS = "syncs = ('cudaStreamSynchronize', 'cudaDeviceSynchronize')"
COPIES = "copies = ('cudaMemcpy', 'cudaMemcpyAsync')"
COPY = "copy = lambda e: to_host.get(e.get('args', {}).get('correlation'))"
KEEP = (
    "keep = [e for e in events if e.get('cat') == 'cuda_runtime' and (e['name'] in syncs",
    "        or e['name'] == 'cudaMemcpy' and copy(e) is not None",
    f"        or e['name'] == 'cudaMemcpyAsync' and copy(e) == {PAGEABLE})]",
)
SORTED = "return [(e['name'], e['dur']) for e in sorted(keep, key=lambda e: e['ts'])]"


def _q4(to_host=TO_HOST, syncs=SYNCS, copies=COPIES, keep=KEEP, result=SORTED) -> str:
    return _waits(*to_host, syncs, copies, COPY, *keep, result)


IMPORT = "from torch.profiler import profile, schedule"
PLAN = "plan = schedule(wait=0, warmup=1, active=steps - 1, repeat=1)"
STEP = "model(batches[i]).sum().backward()"
COUNTS = "return {event.key: event.count for event in prof.key_averages()}"


def _q5(plan=PLAN, opened="with profile(schedule=plan) as prof:", step=STEP, advance=True) -> str:
    loop = ["    for i in range(steps):", f"        {step}"]
    if advance:
        loop.append("        prof.step()")
    return _profile(IMPORT, plan, opened, *loop, COUNTS)


MISTAKES: dict[str, Mistake] = {
    "largest_total": Mistake(
        "the operator with the largest CPU total, and its total's share: took total time for self time",
        {"q1_table": _q1(op='"aten::linear"', share="30.86")},
        ("test_q1_op", "test_q1_share"),
        "took total time for self time",
    ),
    "total_share_of_the_right_op": Mistake(
        "the right operator, with the share of its CPU total (26.71%) instead of its self time",
        {"q1_table": _q1(share="100 * 167.209 / 626.037")},
        ("test_q1_share",),
        "that is the operator's CPU total",
    ),
    "share_as_fraction": Mistake(
        "the share given as a fraction of 1",
        {"q1_table": _q1(share="150.452 / 626.037")},
        ("test_q1_share",),
        "give a percentage (multiply by 100)",
    ),
    "overlaps_counted_twice": Mistake(
        "gpu_busy_percent adds up the clipped intervals without merging them: overlaps count twice",
        {
            "q2_busy": _q2(
                merge=("busy = sum(max(b - a, 0) for a, b in clipped)",),
            )
        },
        ("test_q2_overlap",),
        "counted the time that two kernels overlap twice",
    ),
    "not_clipped": Mistake(
        "gpu_busy_percent merges the intervals but does not clip them to the window",
        {
            "q2_busy": _q2(
                clipped="clipped = sorted(intervals)",
                merge=(
                    "busy, covered = 0.0, -float('inf')",
                    *MERGE[1:],
                ),
            )
        },
        ("test_q2_edges",),
        "clip each interval to the window first",
    ),
    "drops_intervals_that_cross_an_edge": Mistake(
        "gpu_busy_percent leaves out every interval that crosses an edge of the window",
        {
            "q2_busy": _q2(
                clipped="clipped = sorted((a, b) for a, b in intervals if start <= a and b <= end)"
            )
        },
        ("test_q2_edges",),
        "an interval that crosses an edge of the window still counts",
    ),
    "zero_width_divides_by_zero": Mistake(
        "gpu_busy_percent divides by the window's width even when it is 0",
        {"q2_busy": _q2(guard="pass")},
        ("test_q2_empty",),
        "a window of zero width (start == end) holds no time",
    ),
    "busy_as_fraction": Mistake(
        "gpu_busy_percent returns a fraction of 1",
        {"q2_busy": _q2(percent="return busy / (end - start)")},
        ("test_q2_overlap", "test_q2_edges"),
        "that is a fraction of 1: give a percentage",
    ),
    "warmup_recorded": Mistake(
        "the warm-up step counted as recorded: steps 2 to 5",
        {"q3_schedule": "recorded_steps = [2, 3, 4, 5]"},
        ("test_q3_steps",),
        "counted the warm-up step as recorded",
    ),
    "wait_forgotten": Mistake(
        "the wait steps forgotten: steps 1 to 3",
        {"q3_schedule": "recorded_steps = [1, 2, 3]"},
        ("test_q3_steps",),
        "forgot the wait steps",
    ),
    "counted_from_one": Mistake(
        "the steps counted from 1",
        {"q3_schedule": "recorded_steps = [4, 5, 6]"},
        ("test_q3_steps",),
        "count the steps from 0",
    ),
    "cycle_repeated": Mistake(
        "the cycle repeated although repeat=1",
        {"q3_schedule": "recorded_steps = [3, 4, 5, 9, 10, 11]"},
        ("test_q3_steps",),
        "repeat=1 runs the cycle once",
    ),
    "counts_copies_into_pinned_memory": Mistake(
        "host_waits keeps every device-to-host cudaMemcpyAsync, into pinned memory too (those "
        "return at once; the wait, if any, is in the cudaStreamSynchronize after them)",
        {
            "q4_host_waits": _q4(
                keep=(
                    "keep = [e for e in events if e.get('cat') == 'cuda_runtime'",
                    "        and (e['name'] in syncs or e['name'] in copies and copy(e) is not None)]",
                )
            )
        },
        ("test_q4_copies",),
        "counted a cudaMemcpyAsync into pinned memory",
    ),
    "only_copies_into_pageable_memory": Mistake(
        "host_waits keeps a copy only into pageable memory, and so leaves out a cudaMemcpy into "
        "pinned memory, which returns only once it is done",
        {
            "q4_host_waits": _q4(
                keep=(
                    "keep = [e for e in events if e.get('cat') == 'cuda_runtime'",
                    f"        and (e['name'] in syncs or e['name'] in copies and copy(e) == {PAGEABLE})]",
                )
            )
        },
        ("test_q4_copies",),
        "left out a cudaMemcpy into pinned memory",
    ),
    "counts_copies_to_the_device": Mistake(
        "host_waits keeps every cudaMemcpy and cudaMemcpyAsync, whatever their direction",
        {
            "q4_host_waits": _q4(
                keep=(
                    "keep = [e for e in events if e.get('cat') == 'cuda_runtime'",
                    "        and (e['name'] in syncs or e['name'] in copies)]",
                )
            )
        },
        ("test_q4_copies", "test_q4_order"),
        "counts only the waits for the GPU's results",
    ),
    "counts_a_blocking_copy_on_the_device": Mistake(
        "host_waits keeps every cudaMemcpy that is not a copy to the device, a copy on the "
        "device (DtoD) too (review 75: no trace of the tests had one)",
        {
            "q4_host_waits": _q4(
                to_host=(
                    "to_host = {e['args']['correlation']: e['name'] for e in events if e.get('cat') == 'gpu_memcpy'",
                    "           and not e.get('name', '').startswith('Memcpy HtoD')}",
                )
            )
        },
        ("test_q4_copies",),
        "or within it (DtoD)",
    ),
    "counts_kernel_launches": Mistake(
        "host_waits also keeps the kernel launches",
        {
            "q4_host_waits": _q4(
                syncs="syncs = ('cudaStreamSynchronize', 'cudaDeviceSynchronize', 'cudaLaunchKernel')"
            )
        },
        ("test_q4_syncs", "test_q4_copies", "test_q4_order"),
        "counted a kernel launch",
    ),
    "runs_every_batch": Mistake(
        "profile_steps runs a step for every batch it is given, not `steps` (review 66: with "
        "repeat=1 the extra step is not recorded, so only the steps run tell)",
        {
            "q5_profile_steps": _profile(
                IMPORT,
                PLAN,
                "with profile(schedule=plan) as prof:",
                "    for batch in batches:",
                "        model(batch).sum().backward()",
                "        prof.step()",
                COUNTS,
            )
        },
        ("test_q5_warmup",),
        "run only `steps` training steps",
    ),
    "copies_paired_by_time": Mistake(
        "host_waits pairs each copy call with the next GPU-side copy in time, not by its "
        "correlation (review 66: copies on two streams can run in another order than their calls)",
        {
            "q4_host_waits": _waits(
                "gpu = sorted((e for e in events if e.get('cat') == 'gpu_memcpy'), key=lambda e: e['ts'])",
                "calls = sorted((e for e in events if e.get('cat') == 'cuda_runtime'), key=lambda e: e['ts'])",
                "waits = []",
                "for e in calls:",
                "    if e['name'] in ('cudaStreamSynchronize', 'cudaDeviceSynchronize'):",
                "        waits.append((e['name'], e['dur']))",
                "    elif e['name'] in ('cudaMemcpy', 'cudaMemcpyAsync'):",
                "        copy = next((c for c in gpu if c['ts'] >= e['ts']), None)",
                "        if copy is None:",
                "            continue",
                "        gpu.remove(copy)",
                "        if (e['name'] == 'cudaMemcpy' and copy['name'].startswith('Memcpy DtoH')",
                f"                or copy['name'] == {PAGEABLE}):",
                "            waits.append((e['name'], e['dur']))",
                "return waits",
            )
        },
        ("test_q4_copies",),
        "matched a runtime call to a GPU-side copy by time",
    ),
    "unsorted": Mistake(
        "host_waits keeps the calls in the order the trace lists them",
        {"q4_host_waits": _q4(result="return [(e['name'], e['dur']) for e in keep]")},
        ("test_q4_order",),
        "sort the calls by their start, ts",
    ),
    "gpu_side_times": Mistake(
        "host_waits gives a copy the time of its GPU-side copy, not of the call",
        {
            "q4_host_waits": _q4(
                result=(
                    "durs = {e['args']['correlation']: e['dur'] for e in events"
                    " if e.get('cat') == 'gpu_memcpy'}\n"
                    "    return [(e['name'], durs.get(e['args']['correlation'], e['dur']))"
                    " for e in sorted(keep, key=lambda e: e['ts'])]"
                ),
            )
        },
        ("test_q4_copies", "test_q4_order"),
        "gave the GPU-side copy's time",
    ),
    "constant_profile": Mistake(
        "profile_steps profiles nothing and returns the counts of one model and step count "
        "(an outside attack)",
        {
            "q5_profile_steps": (
                "def profile_steps(model, batches, steps):\n"
                '    return {"ProfilerStep*": 2, "aten::linear": 4}'
            )
        },
        ("test_q5_warmup", "test_q5_devices"),
        "record every step after the one warm-up step",
    ),
    "profiles_the_warmup_step": Mistake(
        "profile_steps profiles every step, the warm-up step too (no schedule)",
        {"q5_profile_steps": _q5(plan="plan = None", opened="with profile() as prof:")},
        ("test_q5_warmup", "test_q5_devices"),
        "profiled the warm-up step too",
    ),
    "never_steps_the_profiler": Mistake(
        "profile_steps never calls prof.step(): the schedule stays in its warm-up",
        {"q5_profile_steps": _q5(advance=False)},
        ("test_q5_form", "test_q5_warmup", "test_q5_devices"),
        "call prof.step() at the end of each step",
    ),
    "waits_a_step_too": Mistake(
        "profile_steps waits one step before its warm-up step",
        {
            "q5_profile_steps": _q5(
                plan="plan = schedule(wait=1, warmup=1, active=steps - 2, repeat=1)"
            )
        },
        ("test_q5_warmup", "test_q5_devices"),
        "with no wait steps",
    ),
    "schedule_repeats": Mistake(
        "profile_steps leaves the schedule's repeat at 0: the step after the last active one "
        "starts a new cycle, which clears the record",
        {"q5_profile_steps": _q5(plan="plan = schedule(wait=0, warmup=1, active=steps - 1)")},
        ("test_q5_form", "test_q5_warmup", "test_q5_devices"),
        "give the schedule repeat=1",
    ),
    "hardcodes_cuda": Mistake(
        'profile_steps sends each batch to "cuda" instead of the model\'s device (no GPU here)',
        {"q5_profile_steps": _q5(step="model(batches[i].to('cuda')).sum().backward()")},
        ("test_q5_form", "test_q5_warmup", "test_q5_devices"),
        "this computer has none",
    ),
    "reads_the_loss": Mistake(
        "profile_steps reads each step's loss on the host (loss.item()): fails on meta",
        {
            "q5_profile_steps": _q5(
                step="loss = model(batches[i]).sum()\n            loss.backward()\n"
                "            print(f'loss {loss.item():.3f}')"
            )
        },
        ("test_q5_devices",),
        "read a tensor's value on the host",
    ),
}

# Other right ways to answer: each earns every point.
FULL_MARKS: dict[str, dict[str, str]] = {
    "other_right_answers": {
        **SOLUTIONS,
        # Typed in: the name with spaces around it, the share as the table's column shows it.
        "q1_table": 'busiest_op = " aten::addmm "\nbusiest_self_percent = 24.03',
        # A sweep over the window's edges: +1 where an interval starts, -1 where it ends.
        "q2_busy": _busy(
            "if not end > start:",
            "    return 0.0",
            "edges = []",
            "for a, b in intervals:",
            "    a, b = max(a, start), min(b, end)",
            "    if a < b:",
            "        edges += [(a, 1), (b, -1)]",
            "busy, running, since = 0, 0, None",
            "for time, change in sorted(edges):",
            "    if running == 0 and change == 1:",
            "        since = time",
            "    running += change",
            "    if running == 0:",
            "        busy += time - since",
            "return busy / (end - start) * 100",
        ),
        # Asked of the schedule itself, as the lesson shows.
        "q3_schedule": (
            "import torch\n"
            "plan = torch.profiler.schedule(wait=2, warmup=1, active=3, repeat=1)\n"
            "recorded_steps = [step for step in range(12)\n"
            "                  if plan(step) in (torch.profiler.ProfilerAction.RECORD,\n"
            "                                    torch.profiler.ProfilerAction.RECORD_AND_SAVE)]"
        ),
        # A comprehension, the GPU-side copies looked up by correlation, lists of two back.
        "q4_host_waits": _waits(
            "gpu_copies = {e['args']['correlation']: e['name'] for e in events if e.get('cat') == 'gpu_memcpy'}",
            "def waits(e):",
            "    name = e.get('name', '')",
            "    if name.endswith('Synchronize'):",
            "        return name in ('cudaStreamSynchronize', 'cudaDeviceSynchronize')",
            "    copy = gpu_copies.get(e.get('args', {}).get('correlation'), '')",
            "    if name == 'cudaMemcpy':",
            "        return copy.startswith('Memcpy DtoH')",
            f"    return name == 'cudaMemcpyAsync' and copy == {PAGEABLE}",
            "runtime = sorted((e for e in events if e.get('cat') == 'cuda_runtime'), key=lambda e: e['ts'])",
            "return [[e['name'], e['dur']] for e in runtime if waits(e)]",
        ),
        # The activities named, the batches taken from an iterator, the counts gathered by hand.
        "q5_profile_steps": _profile(
            "import torch",
            "activities = [torch.profiler.ProfilerActivity.CPU]",
            "if torch.cuda.is_available():",
            "    activities.append(torch.profiler.ProfilerActivity.CUDA)",
            "counts = {}",
            "with torch.profiler.profile(activities=activities, schedule=torch.profiler.schedule(",
            "        wait=0, warmup=1, active=steps - 1, repeat=1)) as prof:",
            "    for _, batch in zip(range(steps), iter(batches)):",
            "        model(batch).sum().backward()",
            "        prof.step()",
            "for average in prof.key_averages():",
            "    counts[average.key] = counts.get(average.key, 0) + average.count",
            "return counts",
        ),
    },
}

# Sort-and-merge, the intervals kept as a list of merged [start, end] lists; host_waits
# with a list comprehension over a set of the copies' correlations.
FULL_MARKS["sort_and_merge"] = {
    **SOLUTIONS,
    # 24.03 % typed as the whole number 24: that is 24.0, right to the 3 figures asked (the
    # visible test passes it with a note; the hidden test knows the value).
    "q1_table": _q1(share="24"),
    "q2_busy": _busy(
        "merged = []",
        "for a, b in sorted(intervals):",
        "    a, b = max(a, start), min(b, end)",
        "    if b <= a:",
        "        continue",
        "    if merged and a <= merged[-1][1]:",
        "        merged[-1][1] = max(merged[-1][1], b)",
        "    else:",
        "        merged.append([a, b])",
        "width = end - start",
        "return 100.0 * sum(b - a for a, b in merged) / width if width > 0 else 0.0",
    ),
    "q4_host_waits": _q4(),
}

# Every name the checks and tests use (numbers, math, np, torch, F, check...) is the learner's.
FULL_MARKS["rebinds_every_public_name"] = kit.rebinding_every_public_name(SOLUTIONS, SOURCE)


def _always_equal(number: str, text: str, items: str, mapping: str) -> dict[str, str]:
    return {
        "q1_table": kit.LIARS + f"\nbusiest_op = {text}\nbusiest_self_percent = {number}",
        "q2_busy": _busy(f"return {number}"),
        "q3_schedule": f"recorded_steps = {items}",
        "q4_host_waits": _waits(f"return {items}"),
        "q5_profile_steps": _profile(f"return {mapping}"),
    }


ALWAYS_EQUAL: dict[str, dict[str, str]] = {
    # Each answer a subclass of its own type.
    "always_equal_subclasses": _always_equal(
        "LyingFloat(50.5)",
        "LyingStr('aten::mm')",
        "LyingTuple((LyingInt(12),))",
        "type('LyingDict', (dict,), {'__eq__': lambda s, o: True})({'aten::mm': LyingFloat(1.5)})",
    ),
    # Every answer, and every function's result, one object whose __eq__ returns True.
    "always_equal_objects": _always_equal("Anything()", "Anything()", "Anything()", "Anything()"),
}
ALWAYS_EQUAL_MAX = 0.1 * TOTAL

# One implausible answer per answer cell: each visible test must refuse it with a message.
IMPLAUSIBLE: dict[str, str] = {
    "q1_table": "busiest_op = 150.452\nbusiest_self_percent = 24.03",
    "q2_busy": _busy("return 9.0 / 20 * 1000"),
    "q3_schedule": "recorded_steps = [5, 4, 3]",
    "q4_host_waits": _waits("return {'cudaStreamSynchronize': 3.0}"),
    "q5_profile_steps": _profile("return [('aten::linear', 4)]"),
}

# The mistakes that course-grade's own test grades for this unit (tests/course/test_course_grade_units.py):
# a handful, chosen for what they send across its bridge between the two kernels (a string and
# a float; lists of pairs of floats in, a float back; a list of ints; lists of nested dicts in
# and pairs back; a model and batches on the CPU and on meta in, a dict back, and the error
# a value read on meta raises in the student's kernel).
COURSE_GRADE_SAMPLE = (
    "largest_total",
    "overlaps_counted_twice",
    "zero_width_divides_by_zero",
    "warmup_recorded",
    "counts_copies_to_the_device",
    "profiles_the_warmup_step",
    "reads_the_loss",
    "copies_paired_by_time",  # review 66: two streams' copies out of their calls' order
    "counts_a_blocking_copy_on_the_device",  # review 75
    "runs_every_batch",  # review 66: a student's error text read across the bridge
)

# Tampered submissions: a learner with a mistake who also tries to dodge the failing test,
# by deleting it, or by replacing test cells with `pass`.
DELETED = ("deleted_test_cell", "unsorted", "test_q4_order")
PASSED = ("pass_in_test_cells", "largest_total", ("test_q1_op", "test_q1_share"))


make_submission, expected_score = kit.unit_functions(RELEASE, SOLUTIONS, TOTAL)


FULL_MARKS["profiles_memory_and_stacks"] = {
    # A twelfth outside attack's right answer: profile_memory=True and with_stack=True are
    # options the lesson shows; on meta the Python tracer records one aten::sum more a step,
    # and the test compared with a profile made without it (24/26).
    **SOLUTIONS,
    "q5_profile_steps": _q5(
        opened="with profile(schedule=plan, profile_memory=True, with_stack=True) as prof:"
    ),
}
