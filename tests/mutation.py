"""Test the tests: mutants of every solution cell, graded by course-grade.

A mutant is the unit's solution with one small change at one place, made on the code's
syntax tree (``ast``), never on its text. A mutant the tests still give full marks to
"survived": either it is really still right (an *equivalent* mutant, listed with the
reason in ``tests/equivalent_mutants_<unit>.txt``) or a test is missing. The operators:

- numbers: each numeric constant times 2, over 2, plus 1, minus 1, and 1000 <-> 1024;
- arithmetic: + <-> -, * <-> /, // -> /, ** -> *;
- comparisons: < <-> >=, > <-> <=, == <-> !=, is <-> is not, in <-> not in;
- calls: ``x.to(...)``, ``.float()``, ``.cpu()``, ``.detach()``, ``.item()``,
  ``.pin_memory()``, ``.long()`` replaced by ``x``; a statement that is only a call
  (``optimizer.zero_grad()``) removed; the keywords ``non_blocking``, ``map_location``,
  ``device`` and ``dtype`` dropped; two neighbouring statements of a body swapped;
- dtypes: float32 <-> float64, int64 <-> int32, uint8 <-> float32 (as ``torch.<name>``);
- returns: a function's returned value replaced by its first argument.

``scripts/test-the-tests [UNIT ...]`` grades them all; ``sample(unit, n)`` is the fixed
few that CI grades (``tests/course/test_course_grade_units.py``). No pytest here.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from units import UNITS, submissions  # noqa: E402

REMOVABLE_CALLS = {
    "to",
    "float",
    "cpu",
    "detach",
    "item",
    "pin_memory",
    "long",
    "double",
    "contiguous",
    "clone",
}
STATEMENT_CALLS = {"zero_grad", "backward", "step", "load_state_dict", "seek", "eval", "train"}
DROPPED_KEYWORDS = {"non_blocking", "map_location", "device", "dtype"}
DTYPE_SWAPS = {
    "float32": "float64",
    "float64": "float32",
    "int64": "int32",
    "int32": "int64",
    "uint8": "float32",
    "float16": "float32",
    "long": "int",
}
BINARY_SWAPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Pow: ast.Mult,
}
COMPARE_SWAPS = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass(frozen=True)
class Mutant:
    cell: str  # the answer cell's grade_id
    ident: str  # stable: cell, operator, place, detail
    code: str  # the whole cell, mutated
    original: str

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(True),
                self.code.splitlines(True),
                f"{self.cell} (solution)",
                f"{self.cell} ({self.ident})",
                n=1,
            )
        )


def _numbers(value) -> list[tuple[str, object]]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return []
    out = [
        ("x2", value * 2),
        ("/2", value / 2 if isinstance(value, float) else value // 2 or value / 2),
        ("+1", value + 1),
        ("-1", value - 1),
    ]
    if value == 1000:
        out.append(("1024", 1024))
    if value == 1024:
        out.append(("1000", 1000))
    return [(name, v) for name, v in out if v != value]


class _Sites(ast.NodeVisitor):
    """Every place an operator can change, in a fixed order (so mutant ids are stable)."""

    def __init__(self):
        self.sites: list[tuple[str, ast.AST, object]] = []

    def add(self, kind: str, node: ast.AST, detail) -> None:
        self.sites.append((kind, node, detail))

    def visit_Constant(self, node):
        for name, value in _numbers(node.value):
            self.add("number", node, (name, value))

    def visit_BinOp(self, node):
        if type(node.op) in BINARY_SWAPS:
            self.add("arith", node, BINARY_SWAPS[type(node.op)])
        self.generic_visit(node)

    def visit_Compare(self, node):
        for i, op in enumerate(node.ops):
            if type(op) in COMPARE_SWAPS:
                self.add("compare", node, (i, COMPARE_SWAPS[type(op)]))
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in REMOVABLE_CALLS:
            self.add("call", node, func.attr)
        for i, keyword in enumerate(node.keywords):
            if keyword.arg in DROPPED_KEYWORDS:
                self.add("keyword", node, (i, keyword.arg))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == "torch"
            and node.attr in DTYPE_SWAPS
        ):
            self.add("dtype", node, DTYPE_SWAPS[node.attr])
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        if node.args.args:
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    self.add("return", ret, node.args.args[0].arg)
        self._body(node.body)
        self.generic_visit(node)

    def visit_Module(self, node):
        self._body(node.body)
        self.generic_visit(node)

    def _body(self, body: list) -> None:
        for i, stmt in enumerate(body):
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and isinstance(stmt.value.func, ast.Attribute)
                and stmt.value.func.attr in STATEMENT_CALLS
            ):
                self.add("drop", stmt, (body, i))
            if i + 1 < len(body) and _calls_a_method(stmt) and _calls_a_method(body[i + 1]):
                self.add("swap", stmt, (body, i))


def _calls_a_method(stmt) -> bool:
    """A statement that calls a method (the order of such calls can matter: zero_grad,
    backward, step); two plain assignments swapped would only test Python."""
    return not isinstance(stmt, (ast.FunctionDef, ast.Import, ast.ImportFrom, ast.Return)) and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) for n in ast.walk(stmt)
    )


def _apply(tree: ast.Module, index: int) -> tuple[ast.Module, str]:
    """A copy of ``tree`` with its ``index``-th site mutated, and the mutant's id."""
    tree = copy.deepcopy(tree)
    sites = _Sites()
    sites.visit(tree)
    kind, node, detail = sites.sites[index]
    where = f"{getattr(node, 'lineno', 0)}:{getattr(node, 'col_offset', 0)}"
    if kind == "number":
        name, value = detail
        node.value = value
        ident = f"number{name}@{where}"
    elif kind == "arith":
        node.op = detail()
        ident = f"arith->{detail.__name__}@{where}"
    elif kind == "compare":
        i, op = detail
        node.ops[i] = op()
        ident = f"compare->{op.__name__}@{where}"
    elif kind == "call":
        _replace(tree, node, node.func.value)
        ident = f"no-.{detail}()@{where}"
    elif kind == "keyword":
        i, name = detail
        del node.keywords[i]
        ident = f"no-{name}=@{where}"
    elif kind == "dtype":
        node.attr = detail
        ident = f"dtype->{detail}@{where}"
    elif kind == "return":
        node.value = ast.Name(id=detail, ctx=ast.Load())
        ident = f"return-{detail}@{where}"
    elif kind == "drop":
        body, i = detail
        body[i] = ast.Pass()
        ident = f"drop-{node.value.func.attr}()@{where}"
    else:  # swap
        body, i = detail
        body[i], body[i + 1] = body[i + 1], body[i]
        ident = f"swap@{where}"
    return ast.fix_missing_locations(tree), ident


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new


def mutants(unit: str) -> list[Mutant]:
    """Every mutant of every solution cell of ``unit``, in a fixed order."""
    found = []
    for cell, code in submissions(unit).SOLUTIONS.items():
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        original = ast.unparse(tree)
        sites = _Sites()
        sites.visit(tree)
        seen, idents = set(), set()
        for index in range(len(sites.sites)):
            mutated, ident = _apply(tree, index)
            text = ast.unparse(mutated)
            if text == original or text in seen:
                continue
            seen.add(text)
            ident = f"{cell}:{ident}"
            n = 2
            while ident in idents:  # nested operations that start at the same place
                ident = f"{ident.rsplit('~', 1)[0]}~{n}"
                n += 1
            idents.add(ident)
            found.append(Mutant(cell, ident, text, original))
    return found


def equivalent(unit: str) -> dict[str, str]:
    """Mutant id -> why it is still right, from tests/equivalent_mutants_<unit>.txt."""
    path = HERE / f"equivalent_mutants_{unit}.txt"
    listed = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                ident, _, reason = line.partition("\t")
                listed[ident.strip()] = reason.strip()
    return listed


def sample(unit: str, n: int) -> list[Mutant]:
    """A fixed, spread-out sample of ``n`` mutants not listed as equivalent (for CI)."""
    listed = equivalent(unit)
    pool = [m for m in mutants(unit) if m.ident not in listed]
    if len(pool) <= n:
        return pool
    return [pool[(2 * i + 1) * len(pool) // (2 * n)] for i in range(n)]  # the middle of each nth


def student_id(i: int) -> str:
    return f"mutant{i:04d}"


def grade(unit: str, chosen: list[Mutant], folder: Path, jobs: int) -> dict[str, tuple[str, float]]:
    """Grade ``chosen`` with course-grade in one batch; mutant id -> (fate, score)."""
    from tests.class_fixture import build_course, nbgrader

    subs = submissions(unit)
    course = build_course(folder)
    if unit != "gpu_tensors":
        shutil.copytree(ROOT / "source" / unit, course / "source" / unit)
        nbgrader(course, "generate_assignment", unit, "--force")
    inbox = folder / "inbox"
    inbox.mkdir()
    for i, mutant in enumerate(chosen):
        answers = {**subs.SOLUTIONS, mutant.cell: mutant.code}
        nbformat.write(
            subs.make_submission(subs.RELEASE, answers), inbox / f"{student_id(i)}.ipynb"
        )
    cli = str(Path(sys.executable).parent / "course-grade")
    run = subprocess.run(
        [
            cli,
            unit,
            "--course",
            str(course),
            "--folder",
            str(inbox),
            "--no-progress",
            "-j",
            str(jobs),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    if run.returncode != 0:
        raise RuntimeError(f"course-grade failed: {run.stderr[-2000:]}")
    rows = {
        r["student_id"]: r
        for r in json.loads((course / "reports" / unit / "report.json").read_text())
    }
    return {
        m.ident: (rows[student_id(i)]["fate"], rows[student_id(i)]["score"])
        for i, m in enumerate(chosen)
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/test-the-tests", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("units", nargs="*", help="units to test (default: all)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--list", action="store_true", help="list the mutants, grade nothing")
    args = parser.parse_args(argv)
    units = args.units or UNITS
    unknown = [u for u in units if u not in UNITS]
    if unknown:
        parser.error(f"unknown unit(s) {unknown}; the units are {UNITS}")
    left = 0
    for unit in units:
        every = mutants(unit)
        if args.list:
            for m in every:
                print(m.ident)
            continue
        total = submissions(unit).TOTAL
        listed = equivalent(unit)
        with tempfile.TemporaryDirectory(prefix=f"mutants-{unit}-") as tmp:
            results = grade(unit, every, Path(tmp), args.jobs)
        survivors = [m for m in every if results[m.ident][1] >= total]
        explained = [m for m in survivors if m.ident in listed]
        unexplained = [m for m in survivors if m.ident not in listed]
        stale = sorted(set(listed) - {m.ident for m in every})
        # A mutant listed as still right that now loses points is a right answer the tests
        # stopped accepting (review 75's slow-copies case did that to three, until it named
        # every number): as much a failure as a survivor.
        surviving = {m.ident for m in survivors}
        refused = [m for m in every if m.ident in listed and m.ident not in surviving]
        print(
            f"{unit}: {len(every)} mutants, {len(every) - len(survivors)} killed, "
            f"{len(explained)} equivalent, {len(unexplained)} survived"
        )
        for m in unexplained:
            print(m.diff())
        for ident in stale:
            print(f"  (listed as equivalent but no longer made: {ident})")
        for m in refused:
            fate, score = results[m.ident]
            print(
                f"  listed as still right, but {fate} with {score:g} of {total:g}: {m.ident} ({listed[m.ident]})"
            )
            print(m.diff())
        left += len(unexplained) + len(refused)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
