"""A function that, when a test calls it, walks up the call stack to read the test's
variables (the expected value) and returns that instead of its own answer."""

from tests.hostile._common import HONEST_SCORE, with_trick
from tests.submissions_gpu_tensors import MISTAKES, POINTS

WEAKNESS = 2
STUDENT_ID = "trick-reads-callers-frames"
# size_mb counts MiB (a wrong answer) unless it finds the test's "expected".
ANSWERS = with_trick(
    "",
    base={
        **MISTAKES["seconds"].answers,
        "q2_size_mb": """
import sys

def size_mb(shape, dtype):
    frame = sys._getframe(1)
    while frame is not None:
        if "expected" in frame.f_locals:
            return frame.f_locals["expected"]
        frame = frame.f_back
    return math.prod(shape) * dtype.itemsize / 2**20
""",
    },
)
# The caller is the student's kernel's own bridge code, which holds only the arguments.
EXPECTED_SCORE = HONEST_SCORE - POINTS["test_q2_size_mb"]
EXPECTED_FATE = "graded"
