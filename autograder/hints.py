"""The instructor's own words in a failed test's message, read from the source notebook.

A test's message mixes the instructor's words (a hint, a check's sentence) with values:
the student's answer, what their function returned, the test's inputs. Two readers keep
only the instructor's words, matched verbatim against the trusted source, never against
the student's notebook:

- the class report files a failure under a hint only where its message ends with one of
  ``hints_of`` (each ``(wrong value, "hint")`` pair's text, as the tests list them);
- the feedback of a test cell that holds hidden tests shows its message as one of the
  source's f-strings writes it, each quoted value as "..." (``shown``), or else the end
  of it that is a text of the source. What a hidden test's message quoted of the
  student's returned values could carry the hidden test's inputs into the page (attack
  45: a ``host_waits`` that returned the hidden trace as a call's name).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import nbformat

MIN_HINT_CHARS = 12  # shorter strings ("cpu", "MB", ".") say nothing on their own


def hints_of(source_folder: Path) -> dict[str, set[str]]:
    """The hints each test cell of the source notebooks can end a message with, by grade
    id; "" holds those of the cells every test calls (the checks and other locked cells)."""
    return _gathered(source_folder, 0)


def words_of(source_folder: Path) -> dict[str, set[str]]:
    """Every text each test cell (by grade id; "": the locked cells every test calls) can
    end a message with: its strings, and each f-string's end after its last value."""
    return _gathered(source_folder, 1)


def templates_of(source_folder: Path) -> dict[str, set[tuple]]:
    """Each test cell's f-strings (by grade id, "" as above), as their pieces: each
    constant with its runs of whitespace as one space, None for each value."""
    return _gathered(source_folder, 2)


def _gathered(source_folder: Path, kind: int) -> dict:
    found: dict[str, set] = {}
    for path in sorted(Path(source_folder).glob("*.ipynb")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for key, kinds in _read(data).items():
            found.setdefault(key, set()).update(kinds[kind])
    return found


@functools.lru_cache(maxsize=16)
def _read(data: bytes) -> dict[str, tuple]:
    """One source notebook's (hints, words, templates) by grade id, parsed once per content
    in a process (about 85 ms): each job's copy of the course is a new folder, and each
    feedback page is made in a child forked from the worker, whose cache
    (``worker.feedback.warm``) it starts with."""
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception:  # noqa: BLE001 - the instructor's; an unreadable one has none
        return {}
    found: dict[str, tuple[set, set, set]] = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        key = meta.get("grade_id", "") if meta.get("grade") else ""
        kinds = found.setdefault(key, (set(), set(), set()))
        kinds[0].update(literals(cell.source))
        kinds[1].update(literals(cell.source, every=True))
        kinds[2].update(_templates(cell.source))
    return {key: tuple(frozenset(k) for k in kinds) for key, kinds in found.items()}


def _parsed(code: str):
    try:
        return ast.parse(
            "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("%"))
        )
    except SyntaxError:
        return None


def _templates(code: str) -> set[tuple]:
    tree = _parsed(code)
    found = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.JoinedStr) and any(
            isinstance(v, ast.FormattedValue) for v in node.values
        ):
            found.add(
                tuple(
                    _runs(str(v.value)) if isinstance(v, ast.Constant) else None
                    for v in node.values
                )
            )
    return found


def shown(message: str, words: set[str], templates, hints: set[str]) -> str | None:
    """What of ``message`` is the instructor's: the message as one of ``templates`` (an
    f-string of the source, as its pieces, None for each value) writes it, each value shown
    only where it is one of ``hints`` (the source's hint pairs: no other text of the
    source, such as the kind of an expected value, is told apart by a value) or of
    ``VOCABULARY``, and "..." elsewhere, the template that keeps the most of the
    instructor's text; else the longest of ``words`` it ends with; else None. Nothing but
    the source's own text (and "...") is ever returned."""
    text = _runs(message)
    best, kept = None, 0
    for pieces in templates:
        out = _masked(text, pieces, hints)
        if out is not None and out[1] > kept:
            best, kept = out
    end = ending(message, words)
    if end is not None and len(end) >= kept:
        return end if end == " ".join(text.split()) else f"... {end}"
    return " ".join(best.split()) if best is not None else None


def _masked(text: str, pieces, words: set[str]) -> tuple[str, int] | None:
    """``text`` matched against one template, left to right (the first place each constant
    piece is found: no backtracking, so a student's text cannot make it slow); the result,
    and how many of the instructor's characters it keeps."""
    out, pos, kept = [], 0, 0
    for i, piece in enumerate(pieces):
        if piece is None:
            continue
        last = i == len(pieces) - 1
        if i == 0:
            if not text.startswith(piece):
                return None
            at = 0
        elif last:
            at = len(text) - len(piece)
            if at < pos or not text.endswith(piece):
                return None
        else:
            at = text.find(piece, pos)
            if at < 0:
                return None
        if i > 0:
            out.append(_value(text[pos:at], words))
        out.append(piece)
        kept += len(piece.strip())
        pos = at + len(piece)
    if pieces and pieces[-1] is None:
        out.append(_value(text[pos:], words))
    elif pos != len(text):
        return None
    if kept < MIN_HINT_CHARS:
        return None
    return "".join(out), kept


# Values a message may show as they are: PyTorch's dtypes and device types, the words a
# test says what crossed where with ("converted to float32 on the CPU"). A few bits a
# value at most, never a text of the student's choosing.
_DTYPES = (
    "bool uint8 uint16 uint32 uint64 int8 int16 int32 int64 float16 bfloat16 float32 "
    "float64 complex64 complex128 float8_e4m3fn float8_e5m2"
).split()
_DEVICES = "cpu cuda meta mps xpu host".split()
VOCABULARY = frozenset(
    [*_DTYPES, *(f"torch.{d}" for d in _DTYPES), *_DEVICES, *(repr(d) for d in _DEVICES)]
)


def _value(value: str, words: set[str]) -> str:
    value = " ".join(value.split())
    return value if value in words or value in VOCABULARY else "..."


def _runs(text: str) -> str:
    """Every run of whitespace as one space, the ends kept (they part a template's pieces)."""
    out, space = [], False
    for ch in text:
        if ch.isspace():
            if not space:
                out.append(" ")
            space = True
        else:
            out.append(ch)
            space = False
    return "".join(out)


def ending(message: str, texts: set[str]) -> str | None:
    """The longest of ``texts`` that ``message`` ends with (whitespace runs as one space)."""
    text = " ".join(message.split())
    ends = [t for t in texts if text.endswith(t)]
    return max(ends, key=len) if ends else None


def literals(code: str, every: bool = False) -> set[str]:
    """The texts ``code`` writes that a message can end with. Not ``every``: the hint of
    each pair ``(wrong value, "hint")``, as the tests list them (``hints=[...]``) and the
    checks list known errors, or the end of such an f-string after its last value. Other
    strings (a check's plain failure, "not defined yet") say what went wrong with one
    notebook, not a misconception. ``every``: every string, and every f-string's end."""
    tree = _parsed(code)
    if tree is None:
        return set()
    nodes: list[ast.AST]
    if every:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Constant, ast.JoinedStr))]
    else:
        nodes = [
            pair.elts[1]
            for pair in ast.walk(tree)
            if isinstance(pair, ast.Tuple) and len(pair.elts) == 2
        ]
    found = set()
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif (
            isinstance(node, ast.JoinedStr)
            and node.values
            and isinstance(node.values[-1], ast.Constant)
        ):
            text = str(node.values[-1].value)
        else:
            continue
        text = " ".join(text.split())
        if len(text) >= MIN_HINT_CHARS:
            found.add(text)
    return found
