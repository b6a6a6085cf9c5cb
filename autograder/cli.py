"""``course-grade``: import, grade in sandboxes, give feedback and export, in one command.

    course-grade gpu_tensors --collect            # from the nbgrader exchange
    course-grade gpu_tensors --zip download.zip   # from an LMS zip download
    course-grade gpu_tensors --folder notebooks/  # <student>.ipynb files
    course-grade gpu_tensors                      # what is already in submitted/

Exit status: 0 when the batch completed (whatever the submissions' fates), 2 for what
only the instructor can fix (no bubblewrap, assignment not in the gradebook, bad input
path), 1 for anything unexpected.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autograder import importers
from autograder.grade import InstructorError, grade_assignment
from autograder.report import export_grades, summary_table, write_report


def parse_args(argv):
    p = argparse.ArgumentParser(prog="course-grade", description=__doc__.split("\n\n")[0])
    p.add_argument("assignment", help="assignment id, e.g. gpu_tensors")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--collect", action="store_true",
                        help="import from the nbgrader exchange (nbgrader collect)")
    source.add_argument("--zip", type=Path, metavar="FILE",
                        help="import an LMS zip download (nbgrader zip_collect)")
    source.add_argument("--folder", type=Path, metavar="DIR",
                        help="import a folder of notebooks named <student>.ipynb")
    p.add_argument("--course", type=Path, default=Path.cwd(),
                   help="course folder holding nbgrader_config.py (default: here)")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                   help="submissions graded at once (default: the number of CPUs)")
    p.add_argument("--force", action="store_true",
                   help="grade every submission again, even unchanged ones")
    p.add_argument("--no-sandbox", action="store_true",
                   help="run student code WITHOUT bubblewrap (only for trusted submissions)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    course = args.course.resolve()
    try:
        if args.no_sandbox:
            print("course-grade: WARNING: --no-sandbox: student code runs as you, with your "
                  "files and network. Use it only for submissions you trust.", file=sys.stderr)
        run_import(args, course)
        outcomes = run_grading(args, course)
    except (InstructorError, importers.ImportFailed) as exc:
        print(f"course-grade: {exc}", file=sys.stderr)
        return 2
    grades = course / "grades.csv"
    export_grades(course, args.assignment, grades)
    report_json, _ = write_report(outcomes, course / "reports" / args.assignment)
    print(summary_table(outcomes))
    print(f"\ngrades: {grades}\nreport: {report_json}\nfeedback: {course / 'feedback'}")
    return 0


def run_import(args, course: Path) -> None:
    if args.zip and not args.zip.is_file():
        raise InstructorError(f"no such zip file: {args.zip}")
    if args.folder and not args.folder.is_dir():
        raise InstructorError(f"no such folder: {args.folder}")
    if args.collect:
        problems = importers.import_exchange(course, args.assignment)
    elif args.zip:
        problems = importers.import_zip(course, args.assignment, args.zip.resolve())
    elif args.folder:
        problems = importers.import_folder(course, args.assignment, args.folder.resolve())
    else:
        return
    for student, _, message in problems:
        print(f"course-grade: {student or 'import'}: {message}", file=sys.stderr)
    importers.record_problems(course, args.assignment, problems)


def run_grading(args, course: Path) -> list[dict]:
    from tqdm import tqdm

    with tqdm(total=0, desc="grading", unit="submission", file=sys.stderr,
              disable=args.no_progress) as bar:
        return grade_assignment(course, args.assignment, jobs=args.jobs,
                                sandbox=not args.no_sandbox, force=args.force, progress=bar)


if __name__ == "__main__":
    sys.exit(main())
