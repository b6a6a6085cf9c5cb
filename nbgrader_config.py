"""nbgrader configuration for the course, read by every `nbgrader` command run here.

Each option says why it is set. Folders are relative to this file's folder, the course root.
"""

import os
import sys

c = get_config()  # noqa: F821 (nbgrader's config loader provides it)

# nbgrader runs `alembic` by name when it makes or upgrades the gradebook: the one of the
# environment nbgrader runs from, so `.venv/bin/nbgrader ...` works without activating it.
_tools = os.path.dirname(sys.executable)
if _tools not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _tools + os.pathsep + os.environ.get("PATH", "")

# --- The course and its folders ------------------------------------------------
c.CourseDirectory.course_id = "pytorch-tensors-on-the-gpu"
# The root is where nbgrader runs; a test or the autograder may point it elsewhere.
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# A submission is one notebook: refuse to copy files over 5 MB so a stray dataset
# or a notebook full of outputs cannot fill the grading disk.
c.CourseDirectory.max_file_size = 5_000  # kilobytes
c.CourseDirectory.max_dir_size = 20_000  # kilobytes
# Files and folders one submission may hold (course-grade; each costs nbgrader's own steps).
c.SubmissionLimits.max_files = 1_000

# --- Generating the release ------------------------------------------------------
# Solutions become this stub, so every answer cell raises until it is filled in.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# Solution and hidden-test delimiters only count in cells marked as such, so a
# stray marker in prose never hides text from learners by accident.
c.ClearSolutions.enforce_metadata = True
c.ClearHiddenTests.enforce_metadata = True
# Learners cannot edit or delete test cells and read-only cells in the interface.
c.LockCells.lock_grade_cells = True
c.LockCells.lock_readonly_cells = True

# --- Autograding -----------------------------------------------------------------
# A cell that runs longer than this is stopped and scored as failed (an infinite
# loop must not stall the batch). Importing torch in a cold kernel takes seconds.
c.Execute.timeout = 60
# Stop a runaway cell, then keep grading the rest of the notebook.
c.Execute.interrupt_on_timeout = True
# A cell whose output has not ended 4 s after its reply (Execute.iopub_timeout) keeps
# what came and grading goes on. A kernel's output channel drops what passes its queue,
# the "idle" that ends a cell included, when the grader reads more slowly than the cell
# writes (a loaded machine); True failed the whole notebook then. A kernel that never
# replies is still stopped by Execute.timeout.
c.Execute.raise_on_iopub_timeout = False
# A deleted test cell is put back and run, so deleting a test never dodges it.
c.OverwriteCells.add_missing_cells = True
# Long outputs (a print in a loop) are cut so feedback stays readable and small.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# --- Sandbox (owned by the autograder: autograder/ adds its section below) -------

# --- course-grade sandbox and limits ---
# Read by `course-grade` (autograder/sandbox/bubblewrap.py); plain `nbgrader` ignores the Sandbox
# section. Every grading kernel (the student's and the trusted test kernel) runs under
# bubblewrap with these limits, and a kernel that breaks one is killed with its whole
# process tree.
c.Sandbox.cpu_seconds = 300  # CPU time of the kernel (RLIMIT_CPU)
c.Sandbox.wall_seconds = 600  # lifetime of the kernel, whatever it is doing
c.Sandbox.max_cpus = 1.5  # cores its processes may keep busy together (over 4 s)
c.Sandbox.memory_mb = 4096  # resident memory of the process tree + its tmpfs files
# RLIMIT_AS (2 x memory_mb per process) stops fast allocations early but breaks CUDA:
# set False when grading on a GPU (and bind /dev/nvidia* with Sandbox.extra_ro_binds).
c.Sandbox.address_space_limit = True
c.Sandbox.disk_mb = 512  # the kernel's writable /tmp (its working folder): disk quota
c.Sandbox.shm_mb = 256  # the kernel's /dev/shm
c.Sandbox.max_processes = 256  # processes + threads (RLIMIT_NPROC): stops fork bombs
c.Sandbox.max_output_mb = 2  # output kept per notebook, on every path; the rest is dropped
c.Sandbox.max_message_mb = 64  # largest message a kernel may send the grader
c.Sandbox.max_sent_mb = 1024  # all a student's kernel may send the grader, whatever it is
c.Sandbox.max_file_mb = 200  # largest file a kernel may write
# Units whose kernels import something costly every time: their kernels' templates import
# it once per worker instead. An optimizer, a profile or a DataLoader first imports
# torch._dynamo, about 1.5 CPU s in each of a submission's two kernels.
c.Sandbox.template_preload = {
    unit: ["torch._dynamo"] for unit in ("gpu_training", "gpu_data_loading", "gpu_profiling")
}
# LMS zip downloads (`course-grade ASSIGNMENT --zip FILE`): entries named like
# Blackboard's, <prefix>_<student>_attempt_<date>_<file>. The LMS writes everything up to
# the date; the file name after it is the student's own, so the id is what lies between
# the prefix and the *first* "_attempt_<date>_", underscores and all ("stu_ada"), and a
# file name cannot choose it. The prefix is the assignment id unless set here (e.g. the
# assignment's name in the LMS). Another LMS: set c.FileNameCollectorPlugin.named_regexp.
c.LmsNames.assignment_prefix = ""
c.ImportLimits.max_total_mb = 500  # uncompressed size of one LMS download
c.ImportLimits.max_entries = 20000
# The exchange's collect copies regular files only and refuses unsafe student ids.
c.ExchangeFactory.collect = "autograder.coordinator.importers.SafeExchangeCollect"
# Feedback never shows hidden tests' code, and nothing in it runs in a browser, even
# from plain `nbgrader generate_feedback` (autograder/worker/feedback.py says how).
from autograder.worker.feedback import configure_feedback  # noqa: E402

configure_feedback(c)
