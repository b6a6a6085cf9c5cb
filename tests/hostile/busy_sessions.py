"""Starts busy processes, each in a session of its own, so that the scheduler gives them a
share each and starves the other students' kernels graded beside it into timeouts."""
from tests.hostile._common import BASE, with_trick
from tests.submissions import POINTS

WEAKNESS = 5
STUDENT_ID = "trick-busy-sessions"
ANSWERS = with_trick('''
import subprocess, time
_busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
         for _ in range(40)]
time.sleep(30)
''', cell="q4_worked_example", base=BASE)
# Its kernel gets c.Sandbox.max_cpus cores in all, and the cell times out either way:
# - under a control group (the grader is root and may make one), the busy processes are
#   capped; when the cell times out they are killed and the cell interrupted; the answers
#   it set before it slept stand, as an honest student's would, and nothing is gained;
# - without one, the watchdog kills the kernel for keeping more busy: its tests and the
#   ones after score 0.
# Every other student keeps their fate (asserted for the whole class).
from autograder import cgroups  # noqa: E402

EXPECTED_SCORE = sum(POINTS.values()) - (0 if cgroups.unavailable() is None else sum(
    POINTS[t] for t in ("test_q4_worked_example_form", "test_q4_copy_ms", "test_q4_gpu_route")))
EXPECTED_FATE = "timed out"
