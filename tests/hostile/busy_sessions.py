"""Starts busy processes, each in a session of its own, so that the scheduler gives them a
share each and starves the other students' kernels graded beside it into timeouts."""

from autograder.sandbox import cgroups
from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-busy-sessions"
ANSWERS = with_trick("""
import subprocess, time
_busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
         for _ in range(40)]
time.sleep(30)
""")
# Its kernel gets c.Sandbox.max_cpus cores in all, and the first answer cell times out:
# - under a control group (the grader is root and may make one), the busy processes are
#   capped; when the cell times out they are killed and the cell interrupted; the answer
#   it set before it slept stands, as an honest student's would, and the later cells run:
#   nothing is gained;
# - without one, the watchdog kills the kernel for keeping more busy: every test scores 0.
# Every other student keeps their fate (asserted for the whole class).
EXPECTED_SCORE = HONEST_SCORE if cgroups.unavailable() is None else 0.0
EXPECTED_FATE = "timed out"
