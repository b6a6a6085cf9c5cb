"""train_step hands the loss to a logger thread the notebook started before any call; the
thread forks, and the child reads the loss and pipes it back while the step waits: the
fork was on no thread of the call's, and the child's reads are in its own copy of the
record (attack 44)."""

from tests.submissions_gpu_training import SOLUTIONS, STEP, _train_step

HELPERS = """
import os as _os, queue as _queue, threading as _threading
_asked, _answered = _queue.Queue(), _queue.Queue()

def _logger():
    while True:
        loss = _asked.get()
        read_end, write_end = _os.pipe()
        pid = _os.fork()
        if pid == 0:
            try:
                _os.write(write_end, repr(loss.item()).encode())  # a read, every step
            finally:
                _os._exit(0)
        _os.close(write_end)
        _answered.put(_os.read(read_end, 100))
        _os.close(read_end)
        _os.waitpid(pid, 0)

_threading.Thread(target=_logger, daemon=True).start()

"""

UNIT = "gpu_training"
WEAKNESS = 14
STUDENT_ID = "trick-reads-the-loss-in-a-child-of-an-earlier-thread"
ANSWERS = {
    **SOLUTIONS,
    "q4_train_step": HELPERS
    + _train_step(*STEP, "_asked.put(loss.detach())", "_answered.get()", "return loss.detach()"),
}
# The same read in the call itself: test_q4_stays_on_device's 2 points lost.
TWIN = {
    **SOLUTIONS,
    "q4_train_step": _train_step(
        *STEP,
        "try:",
        "    loss.item()  # a read on the host, every step",
        "except Exception:",
        "    pass  # meta has no value",
        "return loss.detach()",
    ),
}
