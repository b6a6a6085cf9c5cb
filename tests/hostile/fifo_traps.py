"""Leaves FIFOs wherever the grader might open a file, so a reader would hang forever."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 1
STUDENT_ID = "trick-fifo-traps"
ANSWERS = with_trick("""
import os
for folder in [os.getcwd(), "/tmp"]:
    for name in ["gpu_tensors.ipynb", "timestamp.txt", "feedback.html", "kernel.log", "x.ipynb"]:
        path = os.path.join(folder, name)
        try:
            if os.path.lexists(path):
                os.remove(path)
            os.mkfifo(path)
        except OSError:
            pass
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
