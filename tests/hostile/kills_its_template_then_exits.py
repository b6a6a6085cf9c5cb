"""A kernel that kills the template it was forked from (they share a uid), then exits:
the template never says how the kernel ended, and the grader once took that silence for a
kill at the CPU-time limit: "timed out", "kernel stopped at the CPU-time limit", after 2 s
of CPU (a fourteenth outside attack's W1). Silence is said as silence."""

from tests.hostile._common import with_trick

WEAKNESS = 4
STUDENT_ID = "trick-kills-its-template-then-exits"
ANSWERS = with_trick("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos._exit(0)")
# Every test runs after the kernel ended: 0, and the fate is the student's own exit.
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "did not say how"
