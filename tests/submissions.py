"""Realistic submissions of the gpu_tensors exercises, built from the committed release.

The API, for tests and benchmarks alike (no pytest here):

- ``SOLUTIONS``: answer-cell grade_id -> the solution code, read from the source notebook.
- ``POINTS``: test-cell grade_id -> its points, read from the source notebook; ``TOTAL``.
- ``MISTAKES``: name -> ``Mistake``: the answer cells a common mistake changes (its code),
  the test cells it fails, the hint text its feedback must show, and its expected score.
- ``make_submission(release_nb_path, answers)``: the release notebook with those answer
  cells filled in (the others keep their stub), as a ``NotebookNode``.
- ``expected_score(answers_or_mistake)``: the total the autograder must give.
- ``ANSWER_VALUES``: the seed's answers as printed; never in the release or a message.
- ``SEED_ROUNDED``: the solutions with the seed's own rounded answers typed in (0.79 MB,
  0.48 ms, 0.98 ms, as the lesson prints them): full marks.
- ``ALWAYS_EQUAL``: name -> answers whose objects claim to equal anything (float, int and
  str subclasses, a tensor subclass, a plain object with ``__eq__`` returning True), and
  functions that return them; ``ALWAYS_EQUAL_MAX``: the most such a submission may earn.
- ``without_cell`` / ``with_cell_source``: tampered copies of a submission.

Example, a class of submissions::

    from tests.submissions import RELEASE, SOLUTIONS, MISTAKES, make_submission
    notebooks = {"ada": make_submission(RELEASE, SOLUTIONS)}
    notebooks |= {name: make_submission(RELEASE, m.answers) for name, m in MISTAKES.items()}
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "gpu_tensors"
SOURCE = ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
RELEASE = ROOT / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"

_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def read_solutions(source: Path = SOURCE) -> dict[str, str]:
    """Answer-cell grade_id -> the cell's code with the solution markers removed."""
    nb = nbformat.read(source, as_version=4)
    return {
        _nbgrader(cell)["grade_id"]: "\n".join(
            line for line in cell.source.splitlines() if line.strip() not in _MARKERS
        )
        for cell in nb.cells
        if _nbgrader(cell).get("solution")
    }


def read_points(source: Path = SOURCE) -> dict[str, float]:
    """Autograded test-cell grade_id -> points."""
    nb = nbformat.read(source, as_version=4)
    return {
        _nbgrader(cell)["grade_id"]: float(_nbgrader(cell)["points"])
        for cell in nb.cells
        if _nbgrader(cell).get("grade") and not _nbgrader(cell).get("solution")
    }


# The answers to the seed's own questions, as they would be printed. None of them may
# appear in the release, in a visible test, or in a failure message.
ANSWER_VALUES: tuple[str, ...] = (
    "0.786432", "786432",          # question 2: MB, and bytes
    "96", "83", "64", "82",        # question 3: ticks at 3 and 2 steps
    "0.48", "0.976",               # worked example: copy and GPU route, ms
)



def answer_values_in(text: str) -> list[str]:
    """The ANSWER_VALUES that `text` shows as numbers of their own (not inside 0.7864321 or float64)."""
    return [value for value in ANSWER_VALUES
            if re.search(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", text)]


SOLUTIONS: dict[str, str] = read_solutions()
POINTS: dict[str, float] = read_points()
TOTAL: float = sum(POINTS.values())


@dataclass(frozen=True)
class Mistake:
    """A common mistake: the answer cells it changes, and what grading must make of it."""

    description: str
    changes: dict[str, str]          # answer-cell grade_id -> the mistaken code
    fails: tuple[str, ...]           # test-cell grade_ids that must score 0
    hint: str                        # text that must appear in the feedback
    answers: dict[str, str] = field(init=False)  # the whole submission: solutions + changes

    def __post_init__(self):
        unknown = (set(self.changes) - set(SOLUTIONS)) | (set(self.fails) - set(POINTS))
        if unknown:
            raise ValueError(f"Mistake {self.description!r} names cells the notebook lacks: {sorted(unknown)}")
        object.__setattr__(self, "answers", {**SOLUTIONS, **self.changes})

    @property
    def score(self) -> float:
        return TOTAL - sum(POINTS[grade_id] for grade_id in self.fails)


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
    "no_copy_back": Mistake(
        "the worked example's GPU route forgets the copy back",
        {"q4_worked_example": (
            "copy_ms = 12 / 25\ngpu_route_ms = copy_ms + 24 / 1500\nverdict = 'CPU'"
        )},
        ("test_q4_gpu_route",),
        "that forgets the copy back",
    ),
    "seconds": Mistake(
        "the worked example in seconds instead of ms",
        {"q4_worked_example": (
            "copy_ms = 12e6 / 25e9\ngpu_route_ms = 2 * copy_ms + 24e6 / 1500e9\nverdict = 'CPU'"
        )},
        ("test_q4_copy_ms", "test_q4_gpu_route"),
        "that looks like seconds",
    ),
    "device_only": Mistake(
        "prepare_batch fixes the device but not the dtype (the second problem)",
        {"q1_prepare_batch": (
            "def prepare_batch(batch, model):\n    return batch.to(next(model.parameters()).device)"
        )},
        ("test_q1_dtype",),
        "the batch kept its own dtype",
    ),
    "always_float32": Mistake(
        "prepare_batch converts to float32 whatever the model's dtype",
        {"q1_prepare_batch": (
            "def prepare_batch(batch, model):\n    return batch.float().to(next(model.parameters()).device)"
        )},
        ("test_q1_dtype",),
        "the batch became float32, but this model",
    ),
    "mutates_batch": Mistake(
        "prepare_batch converts the learner's batch in place",
        {"q1_prepare_batch": (
            "def prepare_batch(batch, model):\n"
            "    weights = next(model.parameters())\n"
            "    batch.data = batch.data.to(weights.dtype)\n"
            "    return batch.to(weights.device)"
        )},
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
        "rounded further than asked: the seed's \"≈0.5 ms\" and \"about 1 ms\", and 0.8 MB",
        {"q2_mb": "q2_mb = 0.8",
         "q4_worked_example": "copy_ms = 0.5\ngpu_route_ms = 1\nverdict = 'CPU'"},
        ("test_q2_mb_form", "test_q2_mb", "test_q4_worked_example_form", "test_q4_copy_ms",
         "test_q4_gpu_route"),
        "significant figure",
    ),
    "hardcodes_cuda": Mistake(
        "prepare_batch writes \"cuda\" instead of reading the model's device (no GPU here)",
        {"q1_prepare_batch": (
            "def prepare_batch(batch, model):\n    return batch.float().to('cuda')"
        )},
        ("test_q1_shape", "test_q1_device", "test_q1_dtype", "test_q1_unchanged"),
        "this computer has none",
    ),
    "from_numpy_float32": Mistake(
        "believes torch.from_numpy makes float32",
        {"q1_second_problem": "second_problem = 'C'",
         "q4_dtypes": "x_dtype = torch.float32\ny_dtype = torch.float32"},
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


# Objects that claim to equal anything. Every comparison lies; the str subclass's own
# strip() and upper() keep the lie going; the tensor subclass also lies about its device,
# dtype and shape; and `Anything` answers every attribute, call and iteration with itself.
_LIES = """
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __hash__(self): return 0
"""
_LIARS = f"""
class Anything:{_LIES}
    def __getattr__(self, name): return self
    def __call__(self, *args, **kwargs): return self
    def __iter__(self): return iter((self, self))
    def __len__(self): return 2
    def __bool__(self): return True
    def __float__(self): return 1.0
    def __index__(self): return 1

class LyingFloat(float):{_LIES}

class LyingInt(int):{_LIES}

class LyingStr(str):{_LIES}
    def strip(self, *args): return self
    def upper(self): return self

class LyingTuple(tuple):{_LIES}

class LyingTensor(torch.Tensor):{_LIES}
    device = dtype = shape = property(lambda self: Anything())
"""


def _always_equal(make: str, fn_result: str, *, text: str, integer: str, dtype: str,
                  pair: str) -> dict[str, str]:
    first = _LIARS + "\n\ndef prepare_batch(batch, model):\n    return " + make
    return {
        "q1_prepare_batch": first,
        "q1_second_problem": f"second_problem = {text}",
        "q2_mb": f"q2_mb = {fn_result}",
        "q2_size_mb": f"def size_mb(shape, dtype):\n    return {fn_result}",
        "q3_ticks": "\n".join([f"cpu_ticks_3 = {integer}", f"gpu_ticks_3 = {integer}",
                               f"winner_3 = {text}", f"cpu_ticks_2 = {integer}",
                               f"gpu_ticks_2 = {integer}"]),
        "q3_race_ticks": f"def race_ticks(steps, *args, **kwargs):\n    return {pair}",
        "q3_fewest_gpu_steps": f"def fewest_gpu_steps(*args, **kwargs):\n    return {integer}",
        "q4_dtypes": f"x_dtype = {dtype}\ny_dtype = {dtype}",
        "q4_worked_example": f"copy_ms = {fn_result}\ngpu_route_ms = {fn_result}\nverdict = {text}",
    }


ALWAYS_EQUAL: dict[str, dict[str, str]] = {
    # Each answer a subclass of its own type (a dtype cannot be subclassed).
    "always_equal_subclasses": _always_equal(
        "torch.zeros(0).as_subclass(LyingTensor)", "LyingFloat()", text="LyingStr()",
        integer="LyingInt()", dtype="Anything()", pair="LyingTuple((LyingInt(), LyingInt()))"),
    # Every answer, and every function's result, one object whose __eq__ returns True.
    "always_equal_objects": _always_equal(
        "Anything()", "Anything()", text="Anything()", integer="Anything()",
        dtype="Anything()", pair="Anything()"),
}
ALWAYS_EQUAL_MAX = 0.1 * TOTAL


def make_submission(release_nb_path: Path | str = RELEASE, answers: dict[str, str] | None = None):
    """The release notebook with the given answer cells filled in; the rest keep their stub."""
    nb = nbformat.read(release_nb_path, as_version=4)
    answers = dict(answers or {})
    for cell in nb.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if _nbgrader(cell).get("solution") and grade_id in answers:
            cell.source = answers.pop(grade_id)
    if answers:
        raise ValueError(f"the release has no answer cells named {sorted(answers)}")
    return nb


def without_cell(nb, grade_id: str):
    """A copy of `nb` from which the learner deleted the cell `grade_id`."""
    nb = copy.deepcopy(nb)
    kept = [cell for cell in nb.cells if _nbgrader(cell).get("grade_id") != grade_id]
    if len(kept) == len(nb.cells):
        raise ValueError(f"no cell named {grade_id!r}")
    nb.cells = kept
    return nb


def with_cell_source(nb, grade_id: str, source: str):
    """A copy of `nb` in which the learner replaced the code of cell `grade_id`."""
    nb = copy.deepcopy(nb)
    cells = [cell for cell in nb.cells if _nbgrader(cell).get("grade_id") == grade_id]
    if not cells:
        raise ValueError(f"no cell named {grade_id!r}")
    cells[0].source = source
    return nb


def expected_score(answers_or_mistake: dict[str, str] | Mistake) -> float:
    """The total the autograder must give: full for the solutions, a mistake's own score,
    and 0 for the unmodified release (no answers)."""
    if isinstance(answers_or_mistake, Mistake):
        return answers_or_mistake.score
    if answers_or_mistake == SOLUTIONS:
        return TOTAL
    if not answers_or_mistake:
        return 0.0
    raise ValueError("only the solutions, no answers, or a Mistake have a known expected score")
