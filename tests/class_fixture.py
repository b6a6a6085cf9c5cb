"""A whole class of gpu_tensors submissions in a temporary course folder.

``build_course(tmp)`` makes the course (config, source, release, gradebook entry) with
limits small enough for tests. ``CLASS`` lists the submissions and what grading must make
of each: honest ones (the solution, the blank release, every common mistake), resource
abuse and snooping, and the trick submissions of ``tests/hostile/*.py`` (each defines
``STUDENT_ID``, ``ANSWERS`` or ``transform(nb)``, ``EXPECTED_SCORE``, ``EXPECTED_FATE``,
``EXPECTED_FLAG``). ``place_class`` delivers them through the three import routes:
a folder of notebooks, an LMS zip (with a wrongly named and an empty entry) and the
nbgrader exchange, plus an invalid-JSON notebook. No pytest here: the benchmark uses it.
"""
from __future__ import annotations

import importlib.util
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tests.submissions import (ASSIGNMENT, MISTAKES, POINTS, RELEASE, ROOT, SOLUTIONS, TOTAL,
                               make_submission)

NOTEBOOK = f"{ASSIGNMENT}.ipynb"
# The abuse goes in the last answer cell; the others hold the solutions. So a submission
# that gains nothing scores exactly TOTAL minus that cell's tests.
ABUSED_CELL = "q4_worked_example"
ABUSED_TESTS = ("test_q4_worked_example_form", "test_q4_copy_ms", "test_q4_gpu_route")
ABUSE_SCORE = TOTAL - sum(POINTS[t] for t in ABUSED_TESTS)

# Limits for the tests: small, so the abusers are stopped in seconds.
TEST_LIMITS = """
c.Execute.timeout = 10
c.Sandbox.wall_seconds = 150
c.Sandbox.memory_mb = 1500
c.Sandbox.max_processes = 64
c.Sandbox.max_output_mb = 1
c.Exchange.root = {exchange!r}
"""

# Code that, if the sandbox let it, would copy the solution out of source/.
STEAL_SOLUTION = '''import json, re
nb = json.load(open("../../../source/gpu_tensors/gpu_tensors.ipynb"))
for cell in nb["cells"]:
    if cell["metadata"].get("nbgrader", {}).get("grade_id") == "q4_worked_example":
        exec(re.sub(r"### (BEGIN|END) SOLUTION", "", "".join(cell["source"])))
'''
REWRITE_GRADEBOOK = '''import sqlite3
db = sqlite3.connect("../../../gradebook.db")
db.execute("UPDATE grade SET manual_score = 99")
db.commit()
'''
COPY_NEIGHBOUR = '''import json
nb = json.load(open("../../ada/gpu_tensors/gpu_tensors.ipynb"))
for cell in nb["cells"]:
    if cell["metadata"].get("nbgrader", {}).get("grade_id") == "q4_worked_example":
        exec("".join(cell["source"]))
'''
SOCKET = '''import socket
s = socket.create_connection(("1.1.1.1", 80), timeout=3)
s.sendall(b"GET /answers HTTP/1.0\\r\\n\\r\\n")
'''


@dataclass
class Case:
    student: str
    expected_score: float | None
    expected_fate: str
    nb: object = None              # NotebookNode, or None for broken inputs
    expected_flag: str | None = None
    route: str = "folder"          # folder | zip | exchange


def _abuse(student: str, code: str, fate: str = "graded", flag: str | None = None) -> Case:
    return Case(student, ABUSE_SCORE, fate, make_submission(RELEASE, {**SOLUTIONS, ABUSED_CELL: code}),
                flag)


def honest_cases() -> list[Case]:
    cases = [Case("ada", TOTAL, "graded", make_submission(RELEASE, SOLUTIONS)),
             Case("blank", 0.0, "graded", make_submission(RELEASE, {}))]
    cases += [Case(f"mistake-{name.replace('_', '-')}", m.score, "graded",
                   make_submission(RELEASE, m.answers)) for name, m in MISTAKES.items()]
    return cases


def abuse_cases() -> list[Case]:
    return [
        _abuse("exits-os", "import os\nos._exit(0)"),
        _abuse("exits-sys", "import sys\nsys.exit(0)"),
        _abuse("loops", "while True:\n    pass", "timed out"),
        _abuse("hogs-memory", "hog = []\nwhile True:\n    hog.append(b'x' * 50_000_000)",
               "killed for memory"),
        # RLIMIT_NPROC stops the forks; the copies' memory then passes the limit.
        _abuse("fork-bomb", "import os\nwhile True:\n    os.fork()", "killed for memory"),
        _abuse("prints-100mb", "print('x' * 100_000_000)"),
        _abuse("reads-source", STEAL_SOLUTION, "flagged", "grading files"),
        _abuse("rewrites-gradebook", REWRITE_GRADEBOOK, "flagged", "grading files"),
        _abuse("reads-neighbour", COPY_NEIGHBOUR, "flagged"),
        _abuse("opens-socket", SOCKET, "flagged", "network"),
    ]


def hostile_cases() -> list[Case]:
    """The integrity helper's trick submissions, from tests/hostile/*.py."""
    cases = []
    for path in sorted((ROOT / "tests" / "hostile").glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"hostile_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if hasattr(module, "transform"):
            nb = module.transform(make_submission(RELEASE, SOLUTIONS))
        else:
            nb = make_submission(RELEASE, module.ANSWERS)
        cases.append(Case(module.STUDENT_ID, module.EXPECTED_SCORE, module.EXPECTED_FATE, nb,
                          getattr(module, "EXPECTED_FLAG", None)))
    return cases


def broken_cases() -> list[Case]:
    return [
        Case("bad-json", 0.0, "invalid notebook"),
        Case("wrong-name", 0.0, "no notebook", route="zip"),
        Case("empty-entry", 0.0, "invalid notebook", route="zip"),
    ]


def full_class() -> list[Case]:
    cases = honest_cases() + abuse_cases() + hostile_cases() + broken_cases()
    # Two honest students arrive through the LMS zip and one through the exchange.
    for case in cases:
        if case.student in ("mistake-mib", "mistake-bits"):
            case.route = "zip"
        elif case.student == "mistake-seconds":
            case.route = "exchange"
    return cases


def build_course(tmp: Path) -> Path:
    course = tmp / "course"
    course.mkdir()
    exchange = tmp / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    config = (ROOT / "nbgrader_config.py").read_text() + TEST_LIMITS.format(exchange=str(exchange))
    (course / "nbgrader_config.py").write_text(config)
    shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    return course


def nbgrader(course: Path, *args: str) -> None:
    from autograder.importers import _nbgrader

    result = _nbgrader(course, *args)
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{result.stderr[-3000:]}")


def place_class(course: Path, tmp: Path, cases: list[Case]) -> dict[str, Path]:
    """Deliver the class: returns the inputs for course-grade (folder and zip)."""
    folder = tmp / "inbox"
    folder.mkdir()
    zip_path = tmp / "lms-download.zip"
    exchange = Path(_exchange_root(course))
    with zipfile.ZipFile(zip_path, "w") as zf:
        for case in cases:
            if case.student == "bad-json":
                (folder / "bad-json.ipynb").write_text('{"cells": [ this is not JSON')
            elif case.student == "wrong-name":
                zf.writestr("gpu_tensors_wrong-name_attempt_2024-03-01_homework.ipynb",
                            nbformat.writes(make_submission(RELEASE, SOLUTIONS)))
            elif case.student == "empty-entry":
                zf.writestr(f"gpu_tensors_empty-entry_attempt_2024-03-01_{NOTEBOOK}", "")
            elif case.route == "zip":
                zf.writestr(f"gpu_tensors_{case.student}_attempt_2024-03-01_{NOTEBOOK}",
                            nbformat.writes(case.nb))
            elif case.route == "exchange":
                _submit_to_exchange(exchange, case)
            else:
                nbformat.write(case.nb, folder / f"{case.student}.ipynb")
    return {"folder": folder, "zip": zip_path}


def _exchange_root(course: Path) -> str:
    from autograder.config import load_course_config

    return load_course_config(course).Exchange.root


def _submit_to_exchange(exchange: Path, case: Case) -> None:
    from autograder.config import load_course_config

    course_id = load_course_config(exchange.parent / "course").CourseDirectory.course_id
    inbound = exchange / course_id / "inbound"
    inbound.mkdir(parents=True, exist_ok=True)
    stamp = "2024-03-01 10:00:00.000000 UTC"
    dest = inbound / f"{case.student}+{ASSIGNMENT}+{stamp}+abc123"
    dest.mkdir()
    nbformat.write(case.nb, dest / NOTEBOOK)
    (dest / "timestamp.txt").write_text(stamp)
