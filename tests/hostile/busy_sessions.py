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
# Its kernel gets c.Sandbox.max_cpus cores in all (its control group's cap, or, where
# there is none, it is killed for keeping more busy): the cell times out, its tests and
# the ones after score 0, and every other student keeps their fate (asserted for the
# whole class).
EXPECTED_SCORE = sum(POINTS.values()) - sum(
    POINTS[t] for t in ("test_q4_worked_example_form", "test_q4_copy_ms", "test_q4_gpu_route"))
EXPECTED_FATE = "timed out"
