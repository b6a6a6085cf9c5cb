"""The clean room: the trusted tests, run on the student's answers as plain data.

A fresh sandboxed kernel that never runs student code executes the SOURCE notebook's
cells: the instructor's own code and test cells as written, and in place of every answer
cell nothing at all. Before each cell, ``autograder.replay`` binds the answer names to
what the student's kernel recorded (``autograder.recorder``) just before it ran that
cell. The score of each test cell is nbgrader's own rule (``determine_grade``) applied
to the clean room's outputs, so a lying process in the student's kernel can change the
clean room's verdict only by recording answers that are right.
"""
from __future__ import annotations

import ast
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import output_from_msg

from autograder.recorder import source_hash

OUTPUT_MSGS = ("stream", "display_data", "execute_result", "error")


@dataclass
class Step:
    code: str
    grade_id: str | None = None  # set for an autograded test cell
    points: float = 0.0
    hashes: tuple[str, ...] = ()  # how the student's kernel saw this cell's source


@dataclass
class CleanRoomResult:
    scores: dict[str, float] = field(default_factory=dict)  # grade_id -> points earned
    problem: str | None = None  # why the clean room could not finish, if it did not
    messages: dict[str, str] = field(default_factory=dict)  # grade_id -> failure text


def answer_names(source_nb) -> list[str]:
    """The names the solution cells define: the only names the clean room takes."""
    names: set[str] = set()
    for cell in source_nb.cells:
        if cell.cell_type == "code" and _nbgrader(cell).get("solution"):
            names |= defined_names(cell.source)
    return sorted(names)


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
            for alias in node.names:
                if alias.name != "*":
                    names.add((alias.asname or alias.name).split(".")[0])
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        if isinstance(node, ast.Lambda):
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def plan(source_nb, autograded_nb) -> list[Step]:
    """The clean room's cells, in the source notebook's order."""
    ran_as: dict[str, set[str]] = {}
    for cell in autograded_nb.cells if autograded_nb is not None else []:
        grade_id = _nbgrader(cell).get("grade_id")
        if cell.cell_type == "code" and grade_id:
            ran_as.setdefault(grade_id, set()).add(source_hash(cell.source))
    steps = []
    for cell in source_nb.cells:
        meta = _nbgrader(cell)
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        hashes = {source_hash(cell.source)} | ran_as.get(meta.get("grade_id", ""), set())
        is_test = bool(meta.get("grade")) and float(meta.get("points") or 0) > 0
        steps.append(Step(cell.source, meta["grade_id"] if is_test else None,
                          float(meta.get("points") or 0), tuple(sorted(hashes))))
    return steps


def kernel_scores(nb) -> dict[str, float]:
    """Points each autograded test cell earned in a notebook's outputs (nbgrader's rule)."""
    from nbgrader.utils import determine_grade

    scores = {}
    for cell in nb.cells:
        meta = _nbgrader(cell)
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            scores[meta["grade_id"]] = float(determine_grade(cell)[0] or 0)
    return scores


def run(source_nb, autograded_nb, answers_log: Path, launch_kernel, *,
        scratch_dir: Path | None = None, cell_timeout: int = 30) -> CleanRoomResult:
    """Run the clean room on the answers recorded in ``answers_log``."""
    steps = plan(source_nb, autograded_nb)
    result = CleanRoomResult(scores={s.grade_id: 0.0 for s in steps if s.grade_id})
    room = Path(tempfile.mkdtemp(prefix="cleanroom-", dir=scratch_dir))
    try:
        # Only the answers enter the room: no file the student's kernel wrote can be
        # imported or read there.
        shutil.copyfile(answers_log, room / "answers.jsonl")
        km = launch_kernel(room, room / "cleanroom-audit.log")
        try:
            _execute(km, steps, answer_names(source_nb), result, cell_timeout)
        finally:
            km.shutdown_kernel(now=True)
    except Exception as exc:  # noqa: BLE001 - no clean-room pass, and say why
        result.problem = f"{type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(room, ignore_errors=True)
    return result


def _execute(km, steps, names, result: CleanRoomResult, timeout: int) -> None:
    from nbgrader.utils import determine_grade

    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        setup = ("from autograder import recorder as _cg_recorder\n_cg_recorder.stop()\n"
                 "from autograder.replay import Replay as _CgReplay\n"
                 f"_cg_replay = _CgReplay('answers.jsonl', {json.dumps(names)})\n")
        if _run(kc, setup, timeout)[0] != "ok":
            raise RuntimeError("the clean room could not read the recorded answers")
        for step in steps:
            bind = (f"_cg_replay.bind(globals(), {json.dumps(list(step.hashes))}, "
                    f"required={step.grade_id is not None})")
            bound, bind_outputs = _run(kc, bind, timeout)
            status, outputs = _run(kc, step.code, timeout) if bound == "ok" else (
                "error", bind_outputs)
            if step.grade_id is None:
                continue
            cell = nbformat.v4.new_code_cell(step.code, outputs=outputs, metadata={
                "nbgrader": {"grade": True, "solution": False, "grade_id": step.grade_id,
                             "points": step.points}})
            try:
                score = float(determine_grade(cell)[0] or 0)
            except ValueError:  # partial credit above the cell's points
                score = 0.0
            result.scores[step.grade_id] = score
            if status != "ok" or score < step.points:
                result.messages[step.grade_id] = _failure_text(outputs)
    finally:
        kc.stop_channels()


def _run(kc, code: str, timeout: int):
    outputs = []

    def keep(msg):
        if msg["header"]["msg_type"] in OUTPUT_MSGS:
            outputs.append(output_from_msg(msg))

    reply = kc.execute_interactive(code, timeout=timeout, output_hook=keep,
                                   store_history=False, allow_stdin=False)
    return reply["content"]["status"], outputs


def _failure_text(outputs) -> str:
    for out in outputs:
        if out.get("output_type") == "error":
            return f"{out.get('ename')}: {out.get('evalue')}"[:300]
    return "no error, but not full marks"


def _nbgrader(cell) -> dict:
    return dict(cell.get("metadata", {}).get("nbgrader", {}) or {})


def _parse(source: str):
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - without IPython, magics simply fail to parse
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None
