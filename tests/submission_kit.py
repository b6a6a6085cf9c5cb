"""What every unit's submissions module is built from (no pytest here: benchmarks use it).

A unit's module (``tests/submissions_gpu_tensors.py`` for gpu_tensors, ``tests/submissions_<unit>.py``
for the others; ``tests/units.py`` maps one to the other) exposes the same names:

- ``ASSIGNMENT``, ``SOURCE``, ``RELEASE``;
- ``SOLUTIONS``: answer-cell grade_id -> the solution code, read from the source notebook;
- ``POINTS``: test-cell grade_id -> its points, read from the source notebook; ``TOTAL``;
- ``MISTAKES``: name -> ``Mistake``: the answer cells a common mistake changes (its code),
  the test cells it fails, the hint text its feedback must show, and its expected score;
- ``FULL_MARKS``: name -> answers other than the solutions that must earn every point
  (another right way to write it, a value rounded as far as the question allows);
- ``ALWAYS_EQUAL``: name -> answers whose objects claim to equal anything;
  ``ALWAYS_EQUAL_MAX``: the most such a submission may earn (a tenth of the total);
- ``IMPLAUSIBLE``: one answer per answer cell that each visible test must refuse;
- ``COURSE_GRADE_SAMPLE``: the few mistakes course-grade's own test grades;
- ``packs(mistakes)``, ``pack_fails``, ``pack_score`` and ``pack_answers`` (here, for every unit): mistakes
  that touch different cells, grouped to share one submission, its failing cells and answers;
- ``DELETED`` and ``PASSED``: a mistake whose failing test the learner deleted, or
  replaced by ``pass``: (student, mistake, test cell or cells);
- ``ANSWER_VALUES`` and ``answer_values_in(text)``: the answers as they would be printed,
  never in the release or in a message;
- ``make_submission(release, answers)``, ``expected_score(...)``, ``without_cell`` and
  ``with_cell_source``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, NamedTuple

import nbformat

ROOT = Path(__file__).resolve().parents[1]
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def read_solutions(source: Path) -> dict[str, str]:
    """Answer-cell grade_id -> the cell's code with the solution markers removed."""
    nb = nbformat.read(source, as_version=4)
    return {
        nbgrader_meta(cell)["grade_id"]: "\n".join(
            line for line in cell.source.splitlines() if line.strip() not in MARKERS
        )
        for cell in nb.cells
        if nbgrader_meta(cell).get("solution")
    }


def read_points(source: Path) -> dict[str, float]:
    """Autograded test-cell grade_id -> points."""
    nb = nbformat.read(source, as_version=4)
    return {
        nbgrader_meta(cell)["grade_id"]: float(nbgrader_meta(cell)["points"])
        for cell in nb.cells
        if nbgrader_meta(cell).get("grade") and not nbgrader_meta(cell).get("solution")
    }


def values_in(values: tuple[str, ...], text: str) -> list[str]:
    """The `values` that `text` shows as numbers of their own (not inside 0.7864321 or float64)."""
    return [
        value for value in values if re.search(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", text)
    ]


@dataclass(frozen=True)
class Mistake:
    """A common mistake: the answer cells it changes, and what grading must make of it.
    A unit's module subclasses it to name its ``SOLUTIONS`` and ``POINTS``."""

    description: str
    changes: dict[str, str]  # answer-cell grade_id -> the mistaken code
    fails: tuple[str, ...]  # test-cell grade_ids that must score 0
    hint: str  # text that must appear in the feedback
    answers: dict[str, str] = field(init=False)  # the whole submission: solutions + changes

    SOLUTIONS: ClassVar[dict[str, str]] = {}
    POINTS: ClassVar[dict[str, float]] = {}

    def __post_init__(self):
        unknown = (set(self.changes) - set(self.SOLUTIONS)) | (set(self.fails) - set(self.POINTS))
        if unknown:
            raise ValueError(
                f"Mistake {self.description!r} names cells the notebook lacks: {sorted(unknown)}"
            )
        object.__setattr__(self, "answers", {**self.SOLUTIONS, **self.changes})

    @property
    def score(self) -> float:
        return sum(self.POINTS.values()) - sum(self.POINTS[grade_id] for grade_id in self.fails)


def packs(mistakes: dict[str, Mistake]) -> dict[str, dict[str, Mistake]]:
    """Mistakes that may share one submission, first fit in name order: no two in a pack
    change the same answer cell or name the same failing test cell, so the submission must
    fail exactly the union of its mistakes' cells, each with its own hint (one that reached
    into another question's cells would fail a cell it does not name). Student id
    ``mistakes_<i>`` -> {mistake name: mistake}."""
    found: list[dict[str, Mistake]] = []
    for name, mistake in sorted(mistakes.items()):
        pack = next(
            (
                pack
                for pack in found
                if all(
                    not set(mistake.changes) & set(other.changes)
                    and not set(mistake.fails) & set(other.fails)
                    for other in pack.values()
                )
            ),
            None,
        )
        if pack is None:
            found.append(pack := {})
        pack[name] = mistake
    return {f"mistakes_{i}": pack for i, pack in enumerate(found, 1)}


def pack_fails(pack: dict[str, Mistake]) -> set[str]:
    """The test cells a pack's submission must fail: the union of its mistakes'."""
    return {cell for mistake in pack.values() for cell in mistake.fails}


def pack_score(pack: dict[str, Mistake]) -> float:
    """What a pack's submission must score: the total less its failing cells' points (for
    one mistake, its ``score``)."""
    points = next(iter(pack.values())).POINTS
    return sum(points.values()) - sum(points[cell] for cell in pack_fails(pack))


def pack_answers(pack: dict[str, Mistake], solutions: dict[str, str]) -> dict[str, str]:
    """A pack's submission: the solutions, with every mistake's changed cells."""
    return {**solutions, **{cell: code for m in pack.values() for cell, code in m.changes.items()}}


class Unit(NamedTuple):
    """The names every unit's module starts with, read from the unit's committed notebooks:
    ``SOURCE, RELEASE, SOLUTIONS, POINTS, TOTAL, Mistake, answer_values_in = kit.unit(...)``."""

    source: Path
    release: Path
    solutions: dict[str, str]
    points: dict[str, float]
    total: float
    mistake: type[Mistake]
    answer_values_in: Callable[[str], list[str]]


def unit(assignment: str, answer_values: tuple[str, ...], module: str) -> Unit:
    """``module`` is the unit module's ``__name__``: its Mistake is that module's (pickle)."""
    source = ROOT / "source" / assignment / f"{assignment}.ipynb"
    solutions, points = read_solutions(source), read_points(source)
    mistake = type(
        "Mistake",
        (Mistake,),
        {
            "__doc__": f"A common mistake of the {assignment} exercises (see kit.Mistake).",
            "__module__": module,
            "SOLUTIONS": solutions,
            "POINTS": points,
        },
    )

    def answer_values_in(text: str) -> list[str]:
        """The answer values that ``text`` shows as numbers of their own."""
        return values_in(answer_values, text)

    return Unit(
        source,
        ROOT / "release" / assignment / f"{assignment}.ipynb",
        solutions,
        points,
        sum(points.values()),
        mistake,
        answer_values_in,
    )


def make_submission(release_nb_path: Path | str, answers: dict[str, str] | None = None):
    """The release notebook with the given answer cells filled in; the rest keep their stub."""
    nb = nbformat.read(release_nb_path, as_version=4)
    answers = dict(answers or {})
    for cell in nb.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and grade_id in answers:
            cell.source = answers.pop(grade_id)
    if answers:
        raise ValueError(f"the release has no answer cells named {sorted(answers)}")
    return nb


def without_cell(nb, grade_id: str):
    """A copy of `nb` from which the learner deleted the cell `grade_id`."""
    nb = copy.deepcopy(nb)
    kept = [cell for cell in nb.cells if nbgrader_meta(cell).get("grade_id") != grade_id]
    if len(kept) == len(nb.cells):
        raise ValueError(f"no cell named {grade_id!r}")
    nb.cells = kept
    return nb


def with_cell_source(nb, grade_id: str, source: str):
    """A copy of `nb` in which the learner replaced the code of cell `grade_id`."""
    nb = copy.deepcopy(nb)
    cells = [cell for cell in nb.cells if nbgrader_meta(cell).get("grade_id") == grade_id]
    if not cells:
        raise ValueError(f"no cell named {grade_id!r}")
    cells[0].source = source
    return nb


def expected_score(answers_or_mistake, solutions: dict[str, str], total: float) -> float:
    """The total the autograder must give: full for the solutions, a mistake's own score,
    and 0 for the unmodified release (no answers)."""
    if isinstance(answers_or_mistake, Mistake):
        return answers_or_mistake.score
    if answers_or_mistake == solutions:
        return total
    if not answers_or_mistake:
        return 0.0
    raise ValueError("only the solutions, no answers, or a Mistake have a known expected score")


# Objects that claim to equal anything. Every comparison lies; the str subclass's own
# strip() and upper() keep the lie going; the tensor subclass also lies about its device,
# dtype and shape; and `Anything` answers every attribute, call and iteration with itself.
_LIES = """
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __hash__(self): return 0
"""
LIARS = f"""
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


# ---------------------------------------------------------------- names a learner reuses
def public_names(source: Path) -> list[str]:
    """Every public name (no leading underscore) that the checks cell and the test cells of
    `source` read or bind, and ``COMMON_NAMES``: modules (math, np, torch, F...), the checks (check, answer,
    call...), builtins (sum, max, len...) and the tests' own variables (model, images...),
    less the names the answers themselves define."""
    import ast

    from autograder.bridge.testplan import _parse as parse
    from autograder.bridge.testplan import defined_names

    nb = nbformat.read(source, as_version=4)
    answers: set[str] = set()
    names: set[str] = set()
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        tree = parse(cell.source) if cell.cell_type == "code" else None
        if tree is None:
            continue
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.arg):
                found.add(node.arg)
            elif isinstance(node, ast.alias):
                found.add((node.asname or node.name).split(".")[0])
        if meta.get("solution"):
            answers |= defined_names(cell.source)
        elif meta.get("grade") or meta.get("grade_id") == "checks":
            names |= found
    return sorted(n for n in (names | COMMON_NAMES) - answers if not n.startswith("_"))


# Names a learner is likely to reuse, rebound in every unit whether its checks read them or not.
COMMON_NAMES = {
    "numbers",
    "math",
    "np",
    "torch",
    "F",
    "check",
    "answer",
    "call",
    "sum",
    "max",
    "min",
}


# The first answer cell: it keeps a namespace of its own where every answer runs (so the
# answers see the real torch, math...), then gives every public name of the checks and tests
# a value of the learner's (numbers = 25_000_000, as in issue 18). Each later answer cell
# first makes sure that no test cell in between replaced one of them.
_REBIND_FIRST = """\
import builtins as _builtins
_MINE = 25_000_000
_NAMES = {names!r}
_KEPT = _builtins.dict(_builtins.globals())
_KEPT_NAMES = _builtins.set(_KEPT)
"""
_REBIND_EVERY = """\
_replaced = [_n for _n in _NAMES if _builtins.globals().get(_n) is not _MINE]
if _replaced and _builtins.globals().get("_REBOUND"):
    raise _builtins.RuntimeError(f"a cell replaced the learner's own names: {{_replaced}}")
_builtins.exec({code!r}, _KEPT)
_builtins.globals().update({{_n: _v for _n, _v in _KEPT.items()
                            if _n not in _KEPT_NAMES and not _n.startswith("_")}})
_builtins.globals().update(_builtins.dict.fromkeys(_NAMES, _MINE))
_REBOUND = True
"""


def rebinding_every_public_name(solutions: dict[str, str], source: Path) -> dict[str, str]:
    """The solutions, written so that every public name the checks and tests read or bind
    (``public_names``) holds the learner's own value, 25_000_000, from the first answer cell
    on: a right answer, which must keep full marks under every grader. Each answer cell also
    fails if a test cell in between replaced one of those names (a test's variables must
    stay its own)."""
    names = public_names(source)
    answers = {}
    for index, (grade_id, code) in enumerate(solutions.items()):
        first = _REBIND_FIRST.format(names=names) if index == 0 else ""
        answers[grade_id] = first + _REBIND_EVERY.format(code=code)
    return answers


def unit_functions(release: Path, solutions: dict[str, str], total: float):
    """A unit's ``make_submission`` and ``expected_score``, bound to its release, its
    solutions and its total (each submissions_<unit>.py exports both)."""

    def unit_submission(
        release_nb_path: Path | str = release, answers: dict[str, str] | None = None
    ):
        """The release notebook with the given answer cells filled in; the rest keep their stub."""
        return make_submission(release_nb_path, answers)

    def unit_expected_score(answers_or_mistake) -> float:
        """The total the autograder must give: full for the solutions, a mistake's own
        score, and 0 for the unmodified release (no answers)."""
        return expected_score(answers_or_mistake, solutions, total)

    return unit_submission, unit_expected_score
