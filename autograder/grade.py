"""Grade a class: every new or changed submission, N at once, each in its own sandbox.

The parent decides what to grade (content hash against the ledger), rejects what cannot
be graded (no notebook, invalid notebook) without starting a kernel, hands the rest to a
pool of worker processes, and records each result in the ledger as it arrives. Workers
write the gradebook themselves, each for its own student; SQLite's busy timeout (in the
gradebook URL) and a retry keep concurrent writers from failing with "database is
locked".
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

from autograder import fates, inbox
from autograder.config import grading_config
from autograder.ledger import Ledger
from autograder.sandbox import Sandbox, unprivileged, unprivileged_problem
from autograder.worker import grade_submission, init_worker


class InstructorError(Exception):
    """Something only the instructor can fix (no gradebook entry, no bwrap...)."""


def check_ready(course_root: Path, assignment: str, sandbox: bool) -> None:
    config = grading_config(course_root)
    if sandbox and Sandbox(config=config).bwrap_path() is None:
        raise InstructorError(
            "bubblewrap (bwrap) is not installed, so student code cannot be sandboxed. "
            "Install it (Debian/Ubuntu: apt-get install bubblewrap) or, only if you trust "
            "every submission, run again with --no-sandbox.")
    if sandbox and unprivileged():
        problem = unprivileged_problem(Sandbox(config=config).bwrap_path())
        if problem:
            raise InstructorError(
                f"cannot sandboxed-grade as an ordinary user here: {problem}. Run with "
                "sudo (each kernel then runs as its own user), or use --no-sandbox on a "
                "machine you can afford to lose.")
    if not inbox.expected_notebooks(course_root, assignment):
        raise InstructorError(f"no source notebooks in {course_root / 'source' / assignment}")
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(config.CourseDirectory.db_url) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise InstructorError(
                f"assignment {assignment!r} is not in the gradebook: run "
                f"`nbgrader generate_assignment {assignment}` in {course_root} first") from None


def roster(course_root: Path) -> list[str]:
    from nbgrader.api import Gradebook

    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        return sorted(s.id for s in gb.students)


def grade_assignment(course_root: Path, assignment: str, *, jobs: int | None = None,
                     sandbox: bool = True, force: bool = False,
                     on_result: Callable[[dict], None] | None = None,
                     progress=None) -> list[dict]:
    """Grade what needs grading; return every submission's outcome (old and new)."""
    course_root = Path(course_root).resolve()
    check_ready(course_root, assignment, sandbox)
    ledger = Ledger(course_root, assignment)
    notebooks = inbox.expected_notebooks(course_root, assignment)
    cells = inbox.source_cells(course_root, assignment)
    config = grading_config(course_root)
    to_grade, outcomes = [], {}
    for student in inbox.submitted_students(course_root, assignment):
        if not inbox.valid_student_id(student):
            continue  # imports never make such a folder; it is not a student's
        files, refused = inbox.read_submission(course_root / "submitted" / student / assignment,
                                               config)
        digest = inbox.digest(files, refused)
        done = ledger.get(student)
        if done and done.get("digest") == digest and not force:
            outcomes[student] = {**done, "this_run": "unchanged"}
            continue
        rejected = inbox.problem(files, refused, notebooks, cells)
        if rejected:
            fate, message = rejected
            outcome = fates.Outcome(student, fate, 0.0, None, [message], digest=digest).as_dict()
            _zero_submission(course_root, assignment, student)
            ledger.put(outcome)
            outcomes[student] = {**outcome, "this_run": "rejected"}
            continue
        to_grade.append((student, digest))
    for entry in ledger.entries():  # import problems: no submitted folder to grade
        if entry["student_id"] not in outcomes and all(s != entry["student_id"] for s, _ in to_grade):
            outcomes[entry["student_id"]] = {**entry, "this_run": "import"}
            _zero_submission(course_root, assignment, entry["student_id"])
    for student in roster(course_root):
        if student not in outcomes and all(s != student for s, _ in to_grade):
            outcomes[student] = fates.Outcome(
                student, fates.NO_NOTEBOOK, 0.0, None, ["nothing submitted"]).as_dict()

    if progress is not None:
        progress.reset(total=len(to_grade))
    for result in _run_pool(course_root, assignment, to_grade, jobs, sandbox):
        ledger.put(result)
        outcomes[result["student_id"]] = {**result, "this_run": "graded"}
        if on_result:
            on_result(result)
        if progress is not None:
            progress.update(1)
    return [outcomes[s] for s in sorted(outcomes)]


def _zero_submission(course_root: Path, assignment: str, student: str) -> None:
    """A submission that cannot be graded scores 0, never an older attempt's grades, and
    its student is in the gradebook, so grades.csv lists them."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(grading_config(course_root).CourseDirectory.db_url) as gb:
        gb.update_or_create_student(student)
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = 0
        gb.db.commit()


def _run_pool(course_root: Path, assignment: str, to_grade, jobs, sandbox):
    if not to_grade:
        return
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(to_grade)))
    context = multiprocessing.get_context("spawn")
    slots = context.Queue()
    for slot in range(jobs):
        slots.put(slot)
    # Without root, kernels get user namespaces instead of uids (see autograder.sandbox).
    uid_base = -1 if unprivileged() else Sandbox(config=grading_config(course_root)).uid_base
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=init_worker,
                             initargs=(slots, uid_base)) as pool:
        futures = {pool.submit(grade_submission, str(course_root), assignment, student,
                               digest, sandbox): student for student, digest in to_grade}
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as exc:  # a worker that died outright
                yield fates.Outcome(futures[future], fates.ERROR,
                                    details=[f"grading worker failed: {exc}"]).as_dict()
