"""A kernel that ends itself with the exit status of a kill at the CPU-time limit
(128 + SIGXCPU), hoping the grader files it under its own limit: "timed out", "kernel
stopped at the CPU-time limit" (a thirteenth outside attack's A4)."""

from tests.hostile._common import with_trick

WEAKNESS = 4
STUDENT_ID = "trick-exits-with-the-cpu-limits-status"
ANSWERS = with_trick("import os\nos._exit(152)")
# Every test runs after the kernel ended: 0, and the fate is the student's own exit.
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "status 152, after"
