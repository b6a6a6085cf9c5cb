"""train_step reads the loss on the host every step in a child it forks (``os.fork``),
which sends the value back through a pipe: the child's reads are recorded in the child's
copy of the record, never the call's (attack 43)."""

from tests.submissions_gpu_training import SOLUTIONS, STEP, _train_step

HELPERS = """
import os as _os
_history = []

"""


def _step(*read: str) -> str:
    return HELPERS + _train_step(*STEP, *read, "return loss.detach()")


UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-in-a-forked-child"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": _step(
        "read_end, write_end = _os.pipe()",
        "pid = _os.fork()",
        "if pid == 0:",
        "    try:",
        "        _os.write(write_end, repr(loss.item()).encode())  # a read, every step",
        "    finally:",
        "        _os._exit(0)",
        "_os.close(write_end)",
        "_history.append(_os.read(read_end, 100))",
        "_os.close(read_end)",
        "_os.waitpid(pid, 0)",
    ),
}
# The same read in the call itself: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": _step(
        "try:",
        "    _history.append(loss.item())  # a read on the host, every step",
        "except Exception:",
        "    pass  # meta has no value",
    ),
}
