"""End to end: each trick of tests/hostile/ gains nothing, and honest work loses nothing.

Each submission runs as nbgrader's autograde runs it (test cells restored from the source,
hidden tests included, in a sandboxed kernel started through autograder.kernel_entry,
so the audit hooks and the answer recorder are in place), then ``integrity.review``
decides. The score is nbgrader's rule on the kernel's outputs, with the review's
``zero_cells`` revoked: what the pipeline records.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from autograder import integrity
from autograder.cleanroom import CleanRoom, kernel_scores
from autograder.context import GradingContext
from autograder.kernel import kill_tree
from tests.hostile._common import HONEST_SCORE
from tests.submissions import MISTAKES, RELEASE, ROOT, SOLUTIONS, SOURCE, TOTAL, make_submission

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="needs bubblewrap (scripts/setup --system installs it)")
HOSTILE = sorted(p for p in (ROOT / "tests" / "hostile").glob("*.py")
                 if not p.name.startswith("_"))


def load_case(path: Path):
    spec = importlib.util.spec_from_file_location(f"hostile_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_nbgrader_runs_it(nb):
    """Test cells get back their source and metadata, hidden tests included, and a
    deleted one is put back (OverwriteCells.add_missing_cells), as nbgrader does."""
    source = nbformat.read(SOURCE, as_version=4)
    tests = [nbformat.from_dict(c) for c in source.cells
             if c.metadata.get("nbgrader", {}).get("grade")]
    nb = nbformat.from_dict(nb)
    nb.cells = _stable_merge(nb.cells, tests)
    return nb


def _stable_merge(original, restored):
    # Keep the student's order; a restored cell takes its own place, a missing one
    # goes back right after the cell that precedes it in the source.
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in restored}
    out, done = [], set()
    for cell in original:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in done:
            continue
        out.append(by_id.get(grade_id, cell) if grade_id else cell)
        done.add(grade_id)
    source_ids = [c.metadata.get("nbgrader", {}).get("grade_id")
                  for c in nbformat.read(SOURCE, as_version=4).cells]
    for grade_id, cell in by_id.items():
        if grade_id and grade_id not in done:
            before = source_ids[:source_ids.index(grade_id)]
            at = max((i for i, c in enumerate(out)
                      if c.metadata.get("nbgrader", {}).get("grade_id") in before), default=-1)
            out.insert(at + 1, cell)
            done.add(grade_id)
    return out


def grade(nb, student: str, tmp: Path, room=None):
    from nbclient import NotebookClient

    from autograder.kernel import launch_kernel

    work, scratch = tmp / student / "work", tmp / student / "scratch"
    work.mkdir(parents=True)
    scratch.mkdir()
    submitted = work / "submitted.ipynb"
    nbformat.write(nb, submitted)
    run = as_nbgrader_runs_it(nb)
    log = scratch / "audit.log"
    km = launch_kernel(work, log)
    try:
        NotebookClient(run, km=km, timeout=30, allow_errors=True).execute()
    except Exception:  # noqa: BLE001 - a dead kernel ends the run, as in nbgrader
        pass
    finally:
        km.shutdown_kernel(now=True)
    autograded = scratch / "autograded.ipynb"
    nbformat.write(run, autograded)
    ctx = GradingContext(student, "gpu_tensors", ROOT, work, submitted, autograded, SOURCE,
                         log, launch_kernel, scratch, clean_room=room)
    review = integrity.review(ctx)
    scores = kernel_scores(run)
    final = sum(0.0 if g in review.zero_cells else s for g, s in scores.items())
    return final, sum(scores.values()), review


CASES = [(p.stem, p) for p in HOSTILE]


@pytest.fixture(scope="module")
def warm_rooms(tmp_path_factory):
    """One warm clean room per grading thread, as each pipeline worker has one."""
    from autograder.kernel import launch_kernel

    tmp = tmp_path_factory.mktemp("rooms")
    local, rooms = threading.local(), []

    def room():
        if not hasattr(local, "room"):
            local.room = CleanRoom(launch_kernel, Path(tempfile.mkdtemp(dir=tmp)))
            rooms.append(local.room)
        return local.room

    yield room, rooms
    for r in rooms:
        r.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory, warm_rooms):
    """Every case graded once, two at a time (each is mostly a kernel waiting on torch),
    honest and hostile submissions one after another through the same warm clean rooms."""
    tmp = tmp_path_factory.mktemp("integrity")
    jobs = {"honest-solutions": make_submission(RELEASE, SOLUTIONS),
            "honest-mutates-batch": make_submission(RELEASE, MISTAKES["mutates_batch"].answers),
            "honest-device-only": make_submission(RELEASE, MISTAKES["device_only"].answers)}
    for name, path in CASES:
        case = load_case(path)
        jobs[name] = case.transform(None) if hasattr(case, "transform") else \
            make_submission(RELEASE, case.ANSWERS)
    # The honest ones last: any state a trick left in a warm room would show there.
    order = list(jobs)[3:] + list(jobs)[:3]
    room, _ = warm_rooms
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(lambda n: grade(jobs[n], n, tmp, room()), name)
                   for name in order}
        results = {name: f.result() for name, f in futures.items()}
    results["_tmp"] = tmp
    return results


def test_the_warm_clean_rooms_were_reused(graded, warm_rooms):
    _, rooms = warm_rooms
    checks = sum(1 for name, r in graded.items() if name != "_tmp" and r[1] > 0)
    assert rooms and sum(r.starts for r in rooms) < checks  # not a kernel per check


def test_a_dead_clean_room_kernel_is_replaced_and_costs_no_point(graded, warm_rooms):
    room, rooms = warm_rooms
    warm = rooms[0]
    folder = graded["_tmp"] / "honest-solutions" / "scratch"
    source = nbformat.read(SOURCE, as_version=4)
    autograded = nbformat.read(folder / "autograded.ipynb", as_version=4)
    first = warm.check(source, autograded, folder / "audit.log")
    assert sum(first.scores.values()) == TOTAL and first.problem is None
    starts = warm.starts
    kill_tree(warm._km.provisioner.pid)
    again = warm.check(source, autograded, folder / "audit.log")
    assert sum(again.scores.values()) == TOTAL and again.problem is None
    assert warm.starts == starts + 1


@pytest.mark.parametrize("name, mistake", [("honest-solutions", None),
                                           ("honest-mutates-batch", "mutates_batch"),
                                           ("honest-device-only", "device_only")])
def test_honest_work_keeps_every_point_and_raises_no_flag(graded, name, mistake):
    final, kernel, review = graded[name]
    expected = TOTAL if mistake is None else MISTAKES[mistake].score
    assert (final, kernel) == (expected, expected), review.flags
    assert review.flags == [] and review.zero_cells == set()


@pytest.mark.parametrize("name, path", CASES, ids=[n for n, _ in CASES])
def test_a_trick_gains_nothing_and_is_flagged(graded, name, path):
    case = load_case(path)
    final, kernel, review = graded[name]
    assert final == case.EXPECTED_SCORE, (kernel, review)
    assert any(case.EXPECTED_FLAG in flag for flag in review.flags), review.flags
    assert case.EXPECTED_FATE == "flagged"
    assert final <= HONEST_SCORE or name == "lying_values"  # never more than honest work


def test_an_answer_naming_a_library_callable_retires_the_warm_kernel(graded, warm_rooms, tmp_path):
    """A test may call an answer: if the answer is a library function (one that changes
    torch's global state, say), the kernel is not kept for the next submission."""
    _, rooms = warm_rooms
    warm = rooms[0]
    folder = graded["_tmp"] / "honest-solutions" / "scratch"
    setter = {"$": "ref", "kind": "attr", "module": "torch", "name": "set_default_dtype"}
    lines = [json.dumps({"t": "value", "d": "setter", "v": setter})]
    for raw in (folder / "audit.log").read_text().splitlines():
        entry = json.loads(raw)
        if entry.get("t") == "cell" and "size_mb" in entry["names"]:
            entry["names"]["size_mb"] = "setter"
        lines.append(json.dumps(entry))
    log = tmp_path / "audit.log"
    log.write_text("\n".join(lines) + "\n")
    source = nbformat.read(SOURCE, as_version=4)
    autograded = nbformat.read(folder / "autograded.ipynb", as_version=4)
    warm.check(source, autograded, folder / "audit.log")
    assert warm._km is not None  # an honest check keeps the kernel warm
    tainted = warm.check(source, autograded, log)
    assert tainted.scores["test_q2_size_mb"] == 0 and tainted.problem is None
    assert warm._km is None
    starts = warm.starts
    after = warm.check(source, autograded, folder / "audit.log")
    assert sum(after.scores.values()) == TOTAL and warm.starts == starts + 1
