"""What the test kernel runs for an assignment, read from the source notebook.

The source notebook (solutions, visible and hidden tests) is the instructor's and is
trusted; the student's copy is not, so nothing here ever reads it. From the source:

- the test cells (``grade: true`` and not ``solution``), by grade_id, with their code and
  points;
- the instructor's other code cells (set-up, the checks the tests call), which the test
  kernel runs in the source's order before the first test cell that follows them;
- the answer names: every name a solution cell binds at its top level that the cell also
  names outside its solution region (what the release shows: the comment that asks for
  it, a ``def`` line), other than imports and the names the instructor's cells bind. Only
  these are fetched from the student's kernel; everything else a test uses is the test
  kernel's own. A helper the solution happens to bind (``link_mb_per_ms``) is neither
  asked for nor named to the student's kernel: its name is the solution's.
- the function names: the answer names a solution cell binds with ``def``. The tests
  call these; the student's kernel sends any callable answer of them as a function.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat


@dataclass(frozen=True)
class TestCell:
    grade_id: str
    code: str
    points: float
    position: int  # index among the source's code cells


@dataclass(frozen=True)
class TestPlan:
    answer_names: list[str]
    tests: dict[str, TestCell]
    prelude: list[tuple[int, str]] = field(default_factory=list)  # (position, code)
    # A test cell binds an answer name itself: every test must fetch the answers anew.
    tests_rebind: bool = False
    function_names: list[str] = field(default_factory=list)

    def prelude_before(self, grade_id: str, done: set[int]) -> list[tuple[int, str]]:
        """The instructor's cells the test kernel must run before this test, not yet run."""
        limit = self.tests[grade_id].position
        return [(p, code) for p, code in self.prelude if p < limit and p not in done]


_READ: dict[bytes, TestPlan] = {}  # the source's bytes -> its plan (never changed after)


def read(source_path) -> TestPlan:
    """The plan of the source notebook at ``source_path``: parsed once per content in a
    process, since a worker grades the same source for every submission."""
    data = Path(source_path).read_bytes()
    key = hashlib.sha256(data).digest()
    if key not in _READ:
        _READ.clear()
        _READ[key] = plan(nbformat.reads(data.decode("utf-8"), as_version=4))
    return _READ[key]


def plan(source_nb) -> TestPlan:
    names: set[str] = set()
    functions: set[str] = set()
    tests: dict[str, TestCell] = {}
    prelude: list[tuple[int, str]] = []
    position = 0
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            names |= defined_names(cell.source) & _named_outside_solution(cell.source)
            functions |= _defined_functions(cell.source)
        elif meta.get("grade"):
            tests[meta["grade_id"]] = TestCell(
                meta["grade_id"], cell.source, float(meta.get("points") or 0), position
            )
        elif cell.source.strip():
            prelude.append((position, cell.source))
        position += 1
    # A name the instructor's own cells bind (torch, np, check...) is the test kernel's.
    for _, code in prelude:
        names -= defined_names(code)
    rebind = any(defined_names(t.code) & names for t in tests.values())
    return TestPlan(sorted(names), tests, prelude, rebind, sorted(functions & names))


_SOLUTION = re.compile(r"### BEGIN SOLUTION.*?### END SOLUTION", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _named_outside_solution(source: str) -> set[str]:
    """The words of a solution cell that the release keeps (all but its solution regions)."""
    return set(_WORD.findall(_SOLUTION.sub("", source)))


def nbgrader_meta(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return dict(meta) if isinstance(meta, dict) else {}


def _defined_functions(source: str) -> set[str]:
    """Names a cell binds at its top level with ``def``."""
    tree = _parse(source)
    if tree is None:
        return set()
    return {
        node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def defined_names(source: str) -> set[str]:
    """Names bound at the top level of a cell (not inside functions or classes)."""
    tree = _parse(source)
    if tree is None:
        return set()
    names: set[str] = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return  # a module is not an answer; the test kernel imports its own
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, ast.Lambda):
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _parse(source: str):
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None
