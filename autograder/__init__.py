"""The instructor's grading pipeline: import, sandboxed parallel autograde, feedback, export."""

import sys

# jsonschema imports rfc3987_syntax where it is installed (jupyter_events' format-nongpl
# extra brings it) only to check the "iri" format, which no schema of nbformat's or
# nbgrader's uses; building its grammar at import costs 1.8 CPU s in every process that
# imports nbformat: the coordinator and each grading worker. Without it jsonschema skips
# that one format check, as it does wherever the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: never imported
