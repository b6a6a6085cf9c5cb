"""Sends 3,000 empty error outputs, 21 bytes each, paced so that none is lost: far under
the output cap in bytes, each costs nbgrader's own steps, the coordinator and the feedback
page as much as a real one (an outside attack's 84,000 took nbgrader's steps 5.5 s in the
worker, outside every kernel's limits: attack 30). A notebook keeps its first
``outputs.MAX_OUTPUTS`` outputs; past them, outputs are dropped with a note. (6,000 were
once too many for a grader sharing its two cores with another test run: nbclient must
read what is left of the flood within 4 s of the cell's reply, ``Execute.iopub_timeout``.)"""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-floods-with-empty-outputs"
ANSWERS = with_trick("""
import time
_k = get_ipython().kernel
for _i in range(3_000):
    _k.session.send(_k.iopub_socket, "error", {"ename": "", "evalue": "", "traceback": []},
                    parent=_k.get_parent())
    if _i % 200 == 199:
        time.sleep(0.05)  # the kernel's IOPub queue drops what passes its high-water mark
del _k, _i
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "outputs past the first 2,000 dropped"
