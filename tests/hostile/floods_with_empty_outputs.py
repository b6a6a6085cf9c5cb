"""Sends 3,000 empty error outputs, 21 bytes each: far under the output cap in bytes,
each costs nbgrader's own steps, the coordinator and the feedback page as much as a real
one (an outside attack's 84,000 took nbgrader's steps 5.5 s in the worker, outside every
kernel's limits: attack 30). A notebook keeps its first ``outputs.MAX_OUTPUTS`` outputs;
past them, outputs are dropped with a note. The kernel's output socket is told to wait
when its queue is full rather than drop (``XPUB_NODROP``), so every output reaches the
grader however slowly a loaded machine reads them. Paced by sleeps instead, the flood
lost 1,400 of its 3,000 in the kernel beside three busy processes (as on CI, where the
cap was then never reached and the test failed)."""

from tests.hostile._common import HONEST_SCORE, WAIT_WHEN_FULL, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-floods-with-empty-outputs"
ANSWERS = with_trick(
    WAIT_WHEN_FULL
    + """
_k = get_ipython().kernel
for _i in range(3_000):
    _k.session.send(_k.iopub_socket, "error", {"ename": "", "evalue": "", "traceback": []},
                    parent=_k.get_parent())
del _k, _i
"""
)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "outputs past the first 2,000 dropped"
