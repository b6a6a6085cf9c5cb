"""The clean room: the trusted tests, run on the student's answers as plain data.

A sandboxed kernel that never runs student code (one per grading worker, kept warm
from one submission to the next: :class:`CleanRoom`) executes the SOURCE notebook's
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
        scratch_dir: Path | None = None, cell_timeout: int = 30,
        room: "CleanRoom | None" = None) -> CleanRoomResult:
    """Run the clean room on the answers recorded in ``answers_log``.

    With ``room`` (a warm :class:`CleanRoom`), its kernel is reused; without, a fresh
    kernel is started for this one submission and shut down after.
    """
    if room is not None:
        return room.check(source_nb, autograded_nb, answers_log, cell_timeout)
    folder = Path(tempfile.mkdtemp(prefix="cleanroom-", dir=scratch_dir))
    once = CleanRoom(launch_kernel, folder)
    try:
        return once.check(source_nb, autograded_nb, answers_log, cell_timeout)
    finally:
        once.close()
        shutil.rmtree(folder, ignore_errors=True)


class CleanRoom:
    """One clean-room kernel, kept warm to check many submissions one after another.

    What makes reuse safe: the kernel runs only trusted code (the source notebook's
    cells and ``autograder.replay``) on plain decoded data, never a student's code or a
    pickle, so nothing a submission sends can take control of the process. Between
    submissions ``replay.fresh_start`` empties the user namespace and puts back what a
    fresh kernel starts with (working folder, random states, torch's global modes),
    while imported modules stay warm: that is the time saved. What it relies on: the
    test cells hand student functions only objects they built themselves, so a replayed
    in-place change never reaches a module's state; and an answer that names a library
    callable (which a test might call, changing library state) retires the kernel after
    its check. As a guard the kernel is replaced
    after ``max_uses`` submissions, whenever it died or failed to answer, and a check
    that failed on a reused kernel is repeated once on a fresh one, so a worn kernel
    never costs a student a point.

    Only the answers file enters the room: each check copies it into ``folder`` (the
    kernel's working folder, the only one it can write), and nothing else of the
    course or the student's work is visible there.
    """

    def __init__(self, launch_kernel, folder: Path, max_uses: int = 20,
                 startup_timeout: int = 60):
        self.launch_kernel = launch_kernel
        self.folder = Path(folder)
        self.work = self.folder / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.max_uses = max_uses
        self.startup_timeout = startup_timeout
        self.uses = 0
        self.starts = 0  # kernels started in all (the benchmark and tests read it)
        self._km = self._kc = None

    def check(self, source_nb, autograded_nb, answers_log: Path,
              cell_timeout: int = 30) -> CleanRoomResult:
        steps = plan(source_nb, autograded_nb)
        names = answer_names(source_nb)
        answers = self.work / "answers.jsonl"
        try:
            shutil.copyfile(answers_log, answers)
        except OSError as exc:
            return CleanRoomResult(problem=f"the answer record cannot be read ({exc})")
        try:
            for attempt in range(2):
                result = CleanRoomResult(scores={s.grade_id: 0.0 for s in steps if s.grade_id})
                reused = self._km is not None and self.uses < self.max_uses
                try:
                    kc = self._kernel()
                    self.uses += 1
                    if _execute(kc, steps, names, result, cell_timeout):
                        self._discard()  # the answers named library callables: not reused
                    return result
                except Exception as exc:  # noqa: BLE001 - no clean-room pass, and say why
                    self._discard()  # whatever state it was left in, start afresh
                    result.problem = f"{type(exc).__name__}: {exc}"
                    if not reused or attempt:
                        return result
            return result
        finally:
            answers.unlink(missing_ok=True)

    def close(self) -> None:
        self._discard()

    def _kernel(self):
        if self._km is not None and (self.uses >= self.max_uses or not self._km.is_alive()):
            self._discard()
        if self._km is None:
            self._km = self.launch_kernel(self.work, self.folder / "cleanroom-audit.log")
            self.starts += 1
            self.uses = 0
            self._kc = self._km.client()
            self._kc.start_channels()
            self._kc.wait_for_ready(timeout=self.startup_timeout)
        restart_clock = getattr(self._km, "restart_wall_clock", None)
        if restart_clock is not None:  # the wall-time limit is per check, not per life
            restart_clock()
        return self._kc

    def _discard(self) -> None:
        km, kc, self._km, self._kc = self._km, self._kc, None, None
        if kc is not None:
            kc.stop_channels()
        if km is not None:
            try:
                km.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001 - it is gone either way
                pass


def _execute(kc, steps, names, result: CleanRoomResult, timeout: int) -> bool:
    """Run the check; True when the kernel must not be reused (see Replay._resolve)."""
    from nbgrader.utils import determine_grade

    # Two cells: fresh_start empties the namespace the cell itself runs in.
    status, outputs = _run(kc, "__import__('autograder.replay').replay"
                               ".fresh_start(get_ipython())", timeout)
    if status != "ok":
        raise RuntimeError("the clean room could not start afresh: " + _failure_text(outputs))
    setup = ("from autograder.replay import Replay as _CgReplay\n"
             f"_cg_replay = _CgReplay('answers.jsonl', {json.dumps(names)})\n")
    status, outputs = _run(kc, setup, timeout)
    if status != "ok":
        raise RuntimeError("the clean room could not read the recorded answers: "
                           + _failure_text(outputs))
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
    reply = kc.execute_interactive("", timeout=timeout, store_history=False, allow_stdin=False,
                                   user_expressions={"tainted": "_cg_replay.tainted"},
                                   output_hook=lambda msg: None)
    answer = reply["content"].get("user_expressions", {}).get("tainted", {})
    return answer.get("data", {}).get("text/plain") != "False"


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
