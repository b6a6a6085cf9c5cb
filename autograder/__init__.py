"""The instructor's grading pipeline: import, sandboxed parallel autograde, feedback, export."""
