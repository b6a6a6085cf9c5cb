"""nbgrader configuration for the course, read by every `nbgrader` command run here.

Each option says why it is set. Folders are relative to this file's folder, the course root.
"""
c = get_config()  # noqa: F821 (nbgrader's config loader provides it)

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
# A kernel that never answers counts as an error, not a hang.
c.Execute.raise_on_iopub_timeout = True
# A deleted test cell is put back and run, so deleting a test never dodges it.
c.OverwriteCells.add_missing_cells = True
# Long outputs (a print in a loop) are cut so feedback stays readable and small.
c.LimitOutput.max_lines = 200
c.LimitOutput.max_traceback = 50

# --- Sandbox (owned by the autograder: autograder/ adds its section below) -------

# --- course-grade sandbox and limits ---
# Read by `course-grade` (autograder/sandbox.py); plain `nbgrader` ignores the Sandbox
# section. Every student kernel runs under bubblewrap with these limits, and a kernel
# that breaks one is killed with its whole process tree.
c.Sandbox.cpu_seconds = 300        # CPU time of the kernel (RLIMIT_CPU)
c.Sandbox.wall_seconds = 600       # lifetime of the kernel, whatever it is doing
c.Sandbox.memory_mb = 4096         # resident memory of the whole process tree
# RLIMIT_AS (2 x memory_mb per process) stops fast allocations early but breaks CUDA:
# set False when grading on a GPU (and bind /dev/nvidia* with Sandbox.extra_ro_binds).
c.Sandbox.address_space_limit = True
c.Sandbox.max_processes = 256      # processes + threads (RLIMIT_NPROC): stops fork bombs
c.Sandbox.max_output_mb = 2        # output kept per notebook; the rest is dropped
c.Sandbox.max_file_mb = 200        # largest file a kernel may write
# LMS zip downloads (`course-grade ASSIGNMENT --zip FILE`, nbgrader zip_collect): entries
# named like Blackboard's, <anything>_<student>_attempt_<date>_<notebook>.ipynb.
c.FileNameCollectorPlugin.named_regexp = (
    r".*_(?P<student_id>[A-Za-z0-9.\-]+)_attempt_[0-9\-]+_(?P<file_id>[^/]+)$"
)
# Feedback never shows hidden tests' code, even from plain `nbgrader generate_feedback`.
c.GenerateFeedback.preprocessors = [
    "autograder.feedback.HideHiddenTests",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
