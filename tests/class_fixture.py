"""A whole class of gpu_tensors submissions in a temporary course folder.

``build_course(tmp)`` makes the course (config, source, release, gradebook entry) with
limits small enough for tests, and a sentinel file beside it (outside the course) that
no submission may change. ``full_class()`` lists the submissions and what grading must
make of each: honest ones (the solution, the blank release, every common mistake),
resource abuse and snooping, and the trick submissions of ``tests/hostile/*.py`` (see
``tests/hostile/_common.py``). ``place_class`` delivers them through the three import
routes: a folder of notebooks, an LMS zip (with a wrongly named and an empty entry) and
the nbgrader exchange, plus an invalid-JSON notebook; tricks that place files themselves
get an ``Inbox``. No pytest here: the benchmark uses it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from tests import submission_kit as kit
from tests.submissions_gpu_tensors import (
    ASSIGNMENT,
    FULL_MARKS,
    MISTAKES,
    POINTS,
    RELEASE,
    ROOT,
    SOLUTIONS,
    TOTAL,
    make_submission,
)

NOTEBOOK = f"{ASSIGNMENT}.ipynb"
# The abuse goes in the last answer cell; the others hold the solutions. So a submission
# that gains nothing scores exactly TOTAL minus that cell's tests.
ABUSED_CELL = "q4_worked_example"
ABUSED_TESTS = ("test_q4_worked_example_form", "test_q4_copy_ms", "test_q4_gpu_route")
ABUSE_SCORE = TOTAL - sum(POINTS[t] for t in ABUSED_TESTS)

# Limits for the tests: small, so the abusers are stopped in seconds. A cell's 25 s let
# the memory hog reach 1500 MB at 50 MB/s: on these VMs a fresh page takes 1.6 to 40 us
# to clear, and beside a busy kernel the hog filled 80-100 MB/s (CHANGELOG 0.11.2), so
# in 10 s it was sometimes "timed out" instead of "killed for memory".
TEST_LIMITS = """
c.Execute.timeout = 25
c.Sandbox.wall_seconds = 150
c.Sandbox.memory_mb = 1500
c.Sandbox.max_processes = 64
c.Sandbox.max_output_mb = 1
c.Exchange.root = {exchange!r}
# The tests write every exchange folder as one user (as a hub with one system user would).
c.ExchangeCollect.check_owner = False
"""

# Code that, if the sandbox let it, would copy the solution out of source/.
STEAL_SOLUTION = """import json, re
nb = json.load(open("../../../source/gpu_tensors/gpu_tensors.ipynb"))
for cell in nb["cells"]:
    if cell["metadata"].get("nbgrader", {}).get("grade_id") == "q4_worked_example":
        exec(re.sub(r"### (BEGIN|END) SOLUTION", "", "".join(cell["source"])))
"""
REWRITE_GRADEBOOK = """import sqlite3
db = sqlite3.connect("../../../gradebook.db")
db.execute("UPDATE grade SET manual_score = 99")
db.commit()
"""
COPY_NEIGHBOUR = """import json
nb = json.load(open("../../ada/gpu_tensors/gpu_tensors.ipynb"))
for cell in nb["cells"]:
    if cell["metadata"].get("nbgrader", {}).get("grade_id") == "q4_worked_example":
        exec("".join(cell["source"]))
"""
SOCKET = """import socket
s = socket.create_connection(("1.1.1.1", 80), timeout=3)
s.sendall(b"GET /answers HTTP/1.0\\r\\n\\r\\n")
"""


@dataclass
class Case:
    student: str
    expected_score: float | None
    expected_fate: str
    nb: object = None  # NotebookNode, or None for broken or placed inputs
    expected_detail: str | list[str] | None = None  # words of one detail, or them all
    route: str = "folder"  # folder | zip | exchange | placed
    weakness: int = 0  # the issue-8 weakness a trick attacks (0: not a trick)


def _abuse(student: str, code: str, fate: str = "graded", detail: str | None = None) -> Case:
    return Case(
        student,
        ABUSE_SCORE,
        fate,
        make_submission(RELEASE, {**SOLUTIONS, ABUSED_CELL: code}),
        detail,
    )


# The mistakes that arrive by the LMS zip and the exchange (``full_class``) and that other
# tests name; each is a submission of its own in every class.
ALONE = ("mib", "bits", "seconds")


def honest_cases(packed: bool = False) -> list[Case]:
    """The solution, the blank release, every common mistake and the other right answers.
    ``packed``: the mistakes but ``ALONE`` share submissions as ``submission_kit.packs``
    groups them (each must fail exactly the union of its mistakes' test cells): the same
    mistakes in fewer notebooks, for the test class; the benchmark grades them one each."""
    cases = [
        Case("ada", TOTAL, "graded", make_submission(RELEASE, SOLUTIONS)),
        Case("blank", 0.0, "graded", make_submission(RELEASE, {})),
    ]
    mistakes = {
        f"mistake-{name.replace('_', '-')}": {name: m}
        for name, m in MISTAKES.items()
        if not packed or name in ALONE
    }
    if packed:
        rest = {name: m for name, m in MISTAKES.items() if name not in ALONE}
        mistakes.update({s.replace("_", "-"): p for s, p in kit.packs(rest).items()})
    cases += [
        Case(
            student,
            kit.pack_score(pack),
            "graded",
            make_submission(RELEASE, kit.pack_answers(pack, SOLUTIONS)),
        )
        for student, pack in mistakes.items()
    ]
    # Other right answers (the seed's own rounded figures): full marks too.
    cases += [
        Case(f"right-{name.replace('_', '-')}", TOTAL, "graded", make_submission(RELEASE, answers))
        for name, answers in FULL_MARKS.items()
    ]
    return cases


def abuse_cases() -> list[Case]:
    return [
        _abuse("exits-os", "import os\nos._exit(0)"),
        _abuse("exits-sys", "import sys\nsys.exit(0)"),
        _abuse("loops", "while True:\n    pass", "timed out"),
        _abuse(
            "hogs-memory",
            "hog = []\nwhile True:\n    hog.append(b'x' * 50_000_000)",
            "killed for memory",
        ),
        # RLIMIT_NPROC stops the forks; the kernel, at its process limit, is killed.
        _abuse(
            "fork-bomb",
            "import os\nwhile True:\n    os.fork()",
            "too many processes",
            "process limit",
        ),
        # One message over Sandbox.max_message_mb cuts the kernel's output off for good.
        _abuse("prints-100mb", "print('x' * 100_000_000)", detail="kernel cut off"),
        # The course's files are simply not there, nor is the network: the cell fails.
        _abuse("reads-source", STEAL_SOLUTION),
        _abuse("rewrites-gradebook", REWRITE_GRADEBOOK),
        _abuse("reads-neighbour", COPY_NEIGHBOUR),
        _abuse("opens-socket", SOCKET),
    ]


def hostile_modules(unit: str = ASSIGNMENT) -> list:
    """The trick submissions of tests/hostile/*.py on ``unit`` (``UNIT``, by default the
    first), as modules."""
    modules = []
    for path in sorted((ROOT / "tests" / "hostile").glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"hostile_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if getattr(module, "UNIT", ASSIGNMENT) == unit:
            modules.append(module)
    return modules


def hostile_cases() -> list[Case]:
    cases = []
    for module in hostile_modules():
        weakness = module.WEAKNESS
        if hasattr(module, "place"):
            cases += [
                Case(student, score, fate, route="placed", weakness=weakness)
                for student, (score, fate) in module.EXPECTED.items()
            ]
            continue
        if hasattr(module, "transform"):
            nb = module.transform(make_submission(RELEASE, SOLUTIONS))
        else:
            nb = make_submission(RELEASE, module.ANSWERS)
        cases.append(
            Case(
                module.STUDENT_ID,
                module.EXPECTED_SCORE,
                module.EXPECTED_FATE,
                nb,
                getattr(module, "EXPECTED_DETAIL", None),
                weakness=weakness,
            )
        )
    return cases


def broken_cases() -> list[Case]:
    return [
        # No grade: a blank score in every export and report, never a 0.
        Case("bad-json", None, "invalid notebook"),
        Case("wrong-name", None, "no notebook", route="zip"),
        Case("empty-entry", None, "invalid notebook", route="zip"),
    ]


def full_class() -> list[Case]:
    cases = honest_cases(packed=True) + abuse_cases() + hostile_cases() + broken_cases()
    # Two honest students arrive through the LMS zip and one through the exchange.
    for case in cases:
        if case.student in ("mistake-mib", "mistake-bits"):
            case.route = "zip"
        elif case.student == "mistake-seconds":
            case.route = "exchange"
    return cases


def build_course(tmp: Path, extra_config: str = "") -> Path:
    course = tmp / "course"
    exchange = tmp / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    config = (
        (ROOT / "nbgrader_config.py").read_text()
        + TEST_LIMITS.format(exchange=str(exchange))
        + extra_config
    )
    course.mkdir()
    (course / "nbgrader_config.py").write_text(config)
    if _generation_neutral(extra_config):
        copy_generated(course)
    else:
        shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
        nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    sentinel(course).write_text("nobody may change this file\n")
    sentinel(course).chmod(0o600)
    return course


# Settings that only grading reads: a course whose extra settings are all of these is
# generated exactly as one without them (a gradebook elsewhere, CourseDirectory.db_url, is not).
_GRADING_ONLY = ("c.Sandbox.", "c.Execute.")
_GENERATED: list[Path] = []  # this process's generated course, made on first use


def _generation_neutral(extra_config: str) -> bool:
    lines = [line.strip() for line in extra_config.splitlines()]
    return all(not line or line.startswith(("#", *_GRADING_ONLY)) for line in lines)


def copy_generated(course: Path) -> None:
    """The first unit's source, release and SQLite gradebook in ``course``, as nbgrader's
    generate_assignment makes them: copied from a course generated once a process (they do
    not depend on the course's path, nor on settings that only grading or importing read),
    which saves an nbgrader start and a generation, about 6 CPU s, a course."""
    if not _GENERATED:
        import atexit
        import tempfile

        base = Path(tempfile.mkdtemp(prefix="generated-course-"))
        atexit.register(shutil.rmtree, base, True)
        made = base / "course"
        made.mkdir()
        (made / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
        shutil.copytree(ROOT / "source" / ASSIGNMENT, made / "source" / ASSIGNMENT)
        nbgrader(made, "generate_assignment", ASSIGNMENT, "--force")
        _GENERATED.append(made)
    for part in ("source", "release"):
        shutil.copytree(_GENERATED[0] / part / ASSIGNMENT, course / part / ASSIGNMENT)
    shutil.copy2(_GENERATED[0] / "gradebook.db", course / "gradebook.db")


def sentinel(course: Path) -> Path:
    """A file outside the course, beside it, that every trick would like to change."""
    return course.parent / "sentinel.txt"


def nbgrader(course: Path, *args: str) -> None:
    from autograder.coordinator.importers import _nbgrader

    result = _nbgrader(course, *args)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{result.stderr[-3000:]}")


@dataclass
class Inbox:
    """Where a trick puts its own files (``place(inbox)`` in tests/hostile)."""

    course: Path
    sentinel: Path
    zip_entries: list = field(default_factory=list)
    folder_entries: list = field(default_factory=list)
    exchange_entries: list = field(default_factory=list)

    def notebook(self, answers=None) -> bytes:
        return nbformat.writes(make_submission(RELEASE, answers or {})).encode()

    def zip(self, name: str, data: bytes) -> None:
        self.zip_entries.append((name, data))

    def folder(self, name: str, data: bytes | None = None, files: dict | None = None) -> None:
        self.folder_entries.append((name, data, files))

    def exchange(self, name: str, files: dict, links: dict | None = None) -> None:
        self.exchange_entries.append((name, files, links or {}))


def place_class(course: Path, tmp: Path, cases: list[Case]) -> dict[str, Path]:
    """Deliver the class: returns the inputs for course-grade (folder and zip)."""
    folder = tmp / "inbox"
    folder.mkdir()
    zip_path = tmp / "lms-download.zip"
    exchange = Path(_exchange_root(course))
    inbox = Inbox(course, sentinel(course))
    if any(c.route == "placed" for c in cases):
        for module in hostile_modules():
            if hasattr(module, "place"):
                module.place(inbox)
    with zipfile.ZipFile(zip_path, "w") as zf:
        for case in cases:
            nb = _with_paths(case.nb, course) if case.nb is not None else None
            if case.student == "bad-json":
                (folder / "bad-json.ipynb").write_text('{"cells": [ this is not JSON')
            elif case.student == "wrong-name":
                zf.writestr(
                    "gpu_tensors_wrong-name_attempt_2024-03-01_homework.ipynb",
                    nbformat.writes(make_submission(RELEASE, SOLUTIONS)),
                )
            elif case.student == "empty-entry":
                zf.writestr(f"gpu_tensors_empty-entry_attempt_2024-03-01_{NOTEBOOK}", "")
            elif case.route == "zip":
                zf.writestr(
                    f"gpu_tensors_{case.student}_attempt_2024-03-01_{NOTEBOOK}", nbformat.writes(nb)
                )
            elif case.route == "exchange":
                _submit_to_exchange(
                    exchange, case.student, {NOTEBOOK: nbformat.writes(nb).encode()}
                )
            elif case.route == "folder":
                nbformat.write(nb, folder / f"{case.student}.ipynb")
        for name, data in inbox.zip_entries:
            zf.writestr(zipfile.ZipInfo(name, (2024, 3, 1, 0, 0, 0)), data)
    for name, data, files in inbox.folder_entries:
        if files is None:
            (folder / name).write_bytes(data)
        else:
            (folder / name).mkdir()
            for file, content in files.items():
                (folder / name / file).write_bytes(content)
    for name, files, links in inbox.exchange_entries:
        _exchange_folder(exchange, course, name, files, links)
    return {"folder": folder, "zip": zip_path}


def _with_paths(nb, course: Path):
    """Put the real paths into a trick's code, as a student who guessed them would."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        cell.source = cell.source.replace("@SENTINEL@", str(sentinel(course))).replace(
            "@COURSE@", str(course)
        )
    return nb


def _exchange_root(course: Path) -> str:
    from autograder.config import load_course_config

    return load_course_config(course).Exchange.root


def _submit_to_exchange(exchange: Path, student: str, files: dict) -> None:
    stamp = "2024-03-01 10:00:00.000000 UTC"
    _exchange_folder(
        exchange, exchange.parent / "course", f"{student}+{ASSIGNMENT}+{stamp}+abc123", files, {}
    )


def _exchange_folder(exchange: Path, course: Path, name: str, files: dict, links: dict) -> None:
    from autograder.config import load_course_config

    course_id = load_course_config(course).CourseDirectory.course_id
    inbound = exchange / course_id / "inbound"
    inbound.mkdir(parents=True, exist_ok=True)
    dest = inbound / name
    dest.mkdir()
    for file, content in files.items():
        (dest / file).write_bytes(content)
    (dest / "timestamp.txt").write_text(name.split("+")[2] if name.count("+") >= 3 else "")
    for file, target in links.items():
        os.symlink(target, dest / file)
