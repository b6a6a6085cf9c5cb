"""``course-grade``: import, grade in sandboxes, give feedback and export, in one command.

    course-grade gpu_tensors --collect            # from the nbgrader exchange
    course-grade gpu_tensors --zip download.zip   # from an LMS zip download
    course-grade gpu_tensors --folder notebooks/  # <student>.ipynb files
    course-grade gpu_tensors                      # what is already in submitted/
    course-grade --all                            # every assignment of the course
    course-grade --all --scheduler tcp://HOST:8786   # on a Dask cluster
    course-grade gpu_tensors --student ada --force   # grade one student again
    course-grade gpu_tensors --report-only        # after manual grading: reports, exports, feedback

Exit status: 0 when the batch completed (whatever the submissions' fates), 2 for what
only the instructor can fix (no bubblewrap, assignment not in the gradebook, bad input
path, a lost cluster), 130 when interrupted (Ctrl-C: what was graded is kept), 1 for
anything unexpected. Everything the instructor must fix is checked before the course
folder is touched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from pathlib import Path

from autograder import logs
from autograder.config import grading_config
from autograder.coordinator import importers, inbox
from autograder.coordinator.grade import (
    InstructorError,
    NotInGradebook,
    check_ready,
    course_units,
    grade_assignment,
    recorded_outcomes,
)
from autograder.coordinator.report import (
    export_canvas,
    export_grades,
    from_gradebook,
    summary_table,
    with_manual_grades,
    write_class_report,
    write_report,
)
from autograder.printable import printable


def parse_args(argv):
    p = argparse.ArgumentParser(prog="course-grade", description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("assignment", nargs="?", help="assignment id, e.g. gpu_tensors")
    which.add_argument(
        "--all",
        action="store_true",
        help="every assignment in source/ (what is in submitted/, or --collect)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--collect",
        action="store_true",
        help="import from the nbgrader exchange (nbgrader collect)",
    )
    source.add_argument(
        "--zip", type=Path, metavar="FILE", help="import an LMS zip download (one assignment)"
    )
    source.add_argument(
        "--folder",
        type=Path,
        metavar="DIR",
        help="import a folder of notebooks named <student>.ipynb (one assignment)",
    )
    p.add_argument(
        "--course",
        type=Path,
        default=Path.cwd(),
        help="course folder holding nbgrader_config.py (default: here)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=os.cpu_count() or 1,
        help="submissions graded at once on this machine (default: the number of CPUs)",
    )
    p.add_argument(
        "--student",
        action="append",
        dest="students",
        metavar="ID",
        help="grade only this student (repeatable); with --force, grade them again "
        "even if unchanged (as nbgrader autograde --student)",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="grade nothing: rewrite reports and exports from the gradebook and "
        "regenerate feedback (after manual grading in formgrader)",
    )
    p.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on a Dask cluster: its scheduler, e.g. tcp://10.0.0.5:8786",
    )
    p.add_argument(
        "--gpu",
        action="store_true",
        help="grade on GPUs: bind /dev/nvidia* into the sandbox, no address-space "
        "limit, one GPU per worker",
    )
    p.add_argument(
        "--export",
        choices=["canvas"],
        action="append",
        default=[],
        help="also write grades in an LMS's import format (canvas: grades-canvas.csv)",
    )
    p.add_argument(
        "--force", action="store_true", help="grade every submission again, even unchanged ones"
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run student code WITHOUT bubblewrap (only for trusted submissions)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--debug",
        action="store_true",
        help="log everything on stderr, nbgrader's own lines for each submission included",
    )
    p.add_argument(
        "--log-file",
        type=Path,
        metavar="PATH",
        help="append everything the grader and nbgrader log (every worker's too) to PATH",
    )
    args = p.parse_args(argv)
    if args.all and (args.zip or args.folder):
        p.error("--zip and --folder import one assignment: name it instead of --all")
    if args.jobs < 1:
        p.error(f"--jobs must be at least 1 (got {args.jobs})")
    for student in args.students or ():
        if not inbox.valid_student_id(student):
            p.error(f"--student {student!r} is not a student id")
    if args.report_only and (args.collect or args.zip or args.folder or args.force):
        p.error("--report-only grades nothing: it takes no --collect, --zip, --folder or --force")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logs.configure(args.debug, args.log_file.resolve() if args.log_file else None)
    course = args.course.resolve()
    try:
        status = run(args, course)
    except KeyboardInterrupt:  # after grading (the exports): what was graded is recorded
        print(
            "\ncourse-grade: interrupted while writing the reports and exports. What was "
            "graded is recorded; `course-grade ASSIGNMENT --report-only` writes them.",
            file=sys.stderr,
        )
        status = 130
    finally:
        give_to_course_owner(course)
    if status == 130:
        # Interrupted: the grading pool's threads may be blocked for good (writing jobs to
        # workers that are gone), and Python's exit would wait for them. What was graded is
        # committed and the message is said: end now.
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(130)
    return status


def give_to_course_owner(course: Path) -> None:
    """Run as root (sudo) on a course folder that someone else owns, leave nothing of root's
    in it: what this run (or nbgrader as root) wrote becomes the owner's, so their own
    nbgrader and course-grade runs keep working. Links are never followed; nothing outside
    the course folder is touched."""
    if os.geteuid() != 0 or not course.is_dir():
        return
    if not (course / "nbgrader_config.py").is_file() or not (course / "source").is_dir():
        return  # not a course folder (run from the wrong one): nothing of it is ours
    owner = course.stat()
    if owner.st_uid == 0:
        return
    for folder, dirs, files in os.walk(course):  # os.walk does not enter linked folders
        for name in dirs + files:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                if os.lstat(path).st_uid == 0:
                    os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)


def run(args, course: Path) -> int:
    if args.no_sandbox and not args.report_only:
        print(
            "course-grade: WARNING: --no-sandbox: student code runs as you, with your "
            "files and network. Use it only for submissions you trust.",
            file=sys.stderr,
        )
    try:
        assignments = [args.assignment] if args.assignment else all_assignments(course)
        missing: list[str] = []
        for assignment in assignments:  # before anything in the course is touched
            try:
                check_ready(course, assignment, sandbox=not (args.no_sandbox or args.report_only))
            except NotInGradebook as exc:
                missing += exc.assignments  # each unit missing is named, not the first
        if missing:
            raise NotInGradebook(course, missing)
        with one_run_at_a_time(course):
            return grade_and_report(args, course, assignments)
    except InstructorError as exc:
        print(f"course-grade: {printable(str(exc))}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def one_run_at_a_time(course: Path):
    """Hold the course for this run: a second run at once would grade the same submissions
    into the same ledger and gradebook. The lock is the kernel's (flock), so it goes with
    the process, however it ends; its file says who holds it."""
    import fcntl

    folder = course / ".course-grade"
    folder.mkdir(exist_ok=True)
    fd = os.open(folder / "run.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another run"
            raise InstructorError(
                f"another course-grade run ({holder}) is working on this course; wait for "
                "it to end, then run this again. Nothing was changed."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(
            fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0
        )
        yield
    finally:
        os.close(fd)  # the lock ends with it


def grade_and_report(args, course: Path, assignments: list[str]) -> int:
    kept = []  # outcomes recorded this run, for the message if it is interrupted
    try:
        graded = {}
        if args.report_only:
            for assignment in assignments:
                graded[assignment] = recorded_outcomes(course, assignment)
                regenerate_feedback(course, assignment, graded[assignment])
        else:
            from autograder.coordinator import class_report

            threading.Thread(target=class_report.prepare, daemon=True).start()
            with executor_for(args) as executor:
                for assignment in assignments:  # every import first: an id is checked against all
                    run_import(args, course, assignment)
                check_chosen_students(args.students or [], course, assignments)
                for assignment in assignments:
                    graded[assignment] = run_grading(
                        args,
                        course,
                        assignment,
                        executor,
                        lambda o, a=assignment: kept.append((a, o)),
                    )
                    unchanged = [
                        o["student_id"]
                        for o in graded[assignment]
                        if o["student_id"] in (args.students or ())
                        and o.get("this_run") == "unchanged"
                    ]
                    if unchanged and not args.force:
                        print(
                            f"course-grade: {', '.join(unchanged)}: {assignment} unchanged "
                            "since it was graded, so not graded again; add --force to grade it again",
                            file=sys.stderr,
                        )
    except (InstructorError, importers.ImportFailed) as exc:
        print(f"course-grade: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        rest = (
            "run it again without --force to grade only what this run did not (with "
            "--force, everything is graded again)"
            if args.force
            else "run the same command to grade the rest (nothing is graded twice)"
        )
        print(
            f"\ncourse-grade: interrupted. {len(kept)} submission(s) graded in this run "
            f"are kept (gradebook, feedback, ledger); {rest}.",
            file=sys.stderr,
        )
        # A kept submission with manual grades has a new feedback page of its automatic
        # scores: said now, since the run that grades the rest does not grade it again.
        done: dict[str, list[dict]] = {}
        for assignment, outcome in kept:
            done.setdefault(assignment, []).append({**outcome, "this_run": "graded"})
        with contextlib.suppress(Exception):
            warn_of_manual_grades(course, done)
        return 130
    grades = course / "grades.csv"
    # Every unit the gradebook holds, not only this run's: grades.csv is the whole course.
    export_grades(course, graded_units(course, assignments), grades)
    canvas = course / "grades-canvas.csv"
    for name in args.export:  # every unit, as grades.csv: the file is the whole course
        print(f"{name} grades: {export_canvas(course, graded_units(course, assignments), canvas)}")
    if not args.export and canvas.is_file():
        print(
            f"course-grade: {canvas.name} is from an earlier run, not this one: add "
            "--export canvas to bring it up to date before you upload it",
            file=sys.stderr,
        )
    for assignment, outcomes in graded.items():
        outcomes = from_gradebook(course, assignment, outcomes)
        folder = course / "reports" / assignment
        report_json, _ = write_report(outcomes, folder)
        page = write_class_report(course, assignment, outcomes, folder)
        if len(graded) > 1:
            print(f"\n{assignment}")
        print(summary_table(outcomes))
        print(f"report: {report_json}\nclass report: {page}")
    print(f"\ngrades: {grades}\nfeedback: {course / 'feedback'}")
    if not args.report_only:
        warn_of_manual_grades(course, graded)
    return 0


def check_chosen_students(students: list[str], course: Path, assignments: list[str]) -> None:
    """Before anything is graded: each --student has a submission of the unit named, or of
    at least one unit with --all. An id with none is a typo, surely: nothing is graded,
    and the students who have one are listed. With --all, a unit a chosen student has not
    submitted is only said."""

    def has(student: str, assignment: str) -> bool:
        return (course / "submitted" / student / assignment).is_dir()

    for student in students:
        for assignment in assignments:
            if len(assignments) > 1 and not has(student, assignment):
                print(
                    f"course-grade: --student {student}: nothing in "
                    f"submitted/{student}/{assignment} to grade",
                    file=sys.stderr,
                )
    missing = [s for s in students if not any(has(s, a) for a in assignments)]
    if missing:
        known = sorted(
            {p.parent.name for a in assignments for p in (course / "submitted").glob("*/" + a)}
        )
        which = assignments[0] if len(assignments) == 1 else "any unit"
        raise InstructorError(
            f"no submission of {which} for --student {', '.join(missing)}; nothing was "
            f"graded. Students with one: {', '.join(known[:20]) or 'none'}"
            f"{' ...' if len(known) > 20 else ''}"
        )


def warn_of_manual_grades(course: Path, graded: dict[str, list[dict]]) -> None:
    """A submission graded again keeps its manual grades in the gradebook (and so in
    grades.csv and the reports), but its new feedback page was made from the automatic
    scores: say so, before the instructor releases it."""
    for assignment, outcomes in graded.items():
        students = with_manual_grades(
            course, assignment, [o["student_id"] for o in outcomes if o.get("this_run") == "graded"]
        )
        if students:
            print(
                f"course-grade: NOTE: {', '.join(students)} had manual grades in "
                f"formgrader; the gradebook, grades.csv and the reports keep them, but "
                f"their new feedback pages show only the automatic scores. Run "
                f"`course-grade {assignment} --report-only` before `nbgrader "
                f"release_feedback {assignment}`.",
                file=sys.stderr,
            )


def graded_units(course: Path, assignments: list[str]) -> list[str]:
    """The units of the course's gradebook that have a source (this run's among them), in
    course order."""
    from nbgrader.api import Gradebook

    with Gradebook(grading_config(course).CourseDirectory.db_url) as gb:
        known = {a.name for a in gb.assignments}
    return sorted((known & set(all_assignments(course))) | set(assignments))


def all_assignments(course: Path) -> list[str]:
    found = course_units(course)
    if not found:
        raise InstructorError(f"no assignments in {course / 'source'}")
    return found


@contextlib.contextmanager
def executor_for(args):
    """The Dask cluster's executor with --scheduler, else None (a local pool per run)."""
    if not args.scheduler:
        yield None
        return
    from distributed import Client

    try:
        client = Client(args.scheduler, timeout="20s")
    except OSError as exc:
        raise InstructorError(
            f"cannot reach the Dask scheduler at {args.scheduler} ({exc}); "
            "start it with `dask scheduler`"
        ) from None
    if not client.scheduler_info().get("workers"):
        client.close()
        raise InstructorError(
            f"the Dask scheduler at {args.scheduler} has no workers; start "
            "them with `dask worker " + args.scheduler + "`"
        )
    # A job runs once on one worker; Dask moves it elsewhere if its worker dies.
    options = {"pure": False}
    if args.gpu:
        options["resources"] = {"GPU": 1}
    try:
        yield client.get_executor(**options)
    finally:
        client.close()


def run_import(args, course: Path, assignment: str) -> None:
    if args.zip and not args.zip.is_file():
        raise InstructorError(f"no such zip file: {args.zip}")
    if args.folder and not args.folder.is_dir():
        raise InstructorError(f"no such folder: {args.folder}")
    only = args.students  # --student: only theirs are imported, as they alone are graded
    if args.collect:
        problems = importers.import_exchange(course, assignment, only)
    elif args.zip:
        problems = importers.import_zip(course, assignment, args.zip.resolve(), only)
    elif args.folder:
        problems = importers.import_folder(course, assignment, args.folder.resolve(), only)
    else:
        return
    problems = importers.summarized(problems)
    for student, _, message in problems:
        print(
            f"course-grade: {printable(student or 'import')}: {printable(message)}", file=sys.stderr
        )
    importers.record_problems(course, assignment, problems)


def run_grading(args, course: Path, assignment: str, executor, on_result=None) -> list[dict]:
    from tqdm import tqdm

    with tqdm(
        total=0,
        desc=f"grading {assignment}",
        unit="submission",
        file=sys.stderr,
        disable=args.no_progress,
    ) as bar:
        return grade_assignment(
            course,
            assignment,
            jobs=args.jobs,
            sandbox=not args.no_sandbox,
            force=args.force,
            executor=executor,
            gpu=args.gpu,
            progress=bar,
            on_result=on_result,
            students=set(args.students) if args.students else None,
        )


def regenerate_feedback(course: Path, assignment: str, outcomes: list[dict]) -> None:
    """nbgrader's generate_feedback, with this course's sanitized, hidden-test-free
    feedback, for every autograded submission: the pages then show manual grades too.
    Each page is made within its limits, as in grading (``worker.feedback_in_child``),
    else a plain page of scores takes its place."""
    from autograder.job import NBGRADER_FILES
    from autograder.sandbox.safefiles import regular_files, replace_folder
    from autograder.worker.worker import feedback_failed, feedback_in_child, plain_pages

    for outcome in outcomes:
        student = outcome["student_id"]
        graded = course / "autograded" / student / assignment
        if not graded.is_dir():
            continue
        config = grading_config(course)
        config.CourseDirectory.assignment_id = assignment
        config.CourseDirectory.student_id = student
        built = feedback_in_child(config)
        if built.ok:
            continue
        print(f"course-grade: {student}: {feedback_failed(built)}", file=sys.stderr)
        notebooks = sorted(p.name for p in graded.glob("*.ipynb"))
        pages = plain_pages(config, student, notebooks, built)
        if pages:
            # release_feedback reads nbgrader's timestamp and secret beside each page, as
            # grading wrote them into the autograded folder
            kept = regular_files(graded, 1 << 20, 1 << 20, skip=lambda n: n not in NBGRADER_FILES)
            replace_folder(course / "feedback" / student / assignment, {**kept[0], **pages})


if __name__ == "__main__":
    sys.exit(main())
