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
