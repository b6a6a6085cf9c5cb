"""training_memory_mb returns a dict of 30,000 int keys chosen so that, once they are
plain ints in the test kernel, every one has the same hash: building that dict there
takes quadratic time, hoping the test kernel runs out of time and the points are
withheld ("needs review") for every test after it."""

from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 13
STUDENT_ID = "trick-colliding-dict-keys"
ANSWERS = {
    **SOLUTIONS,
    "q1_training_memory": SOLUTIONS["q1_training_memory"]
    + """

class _Key(int):  # distinct hashes here; plain ints, all hashing to 0, once sent
    def __hash__(self):
        return int.__int__(self) % 1000003

_P = 2**61 - 1
_C = (10**399) // _P
_COLLIDING = {_Key((_C + k) * _P): 0 for k in range(1, 30_001)}

def training_memory_mb(model, optimizer):
    return _COLLIDING
""",
}
TWIN = None
COSTLY = True  # the report names the refused answer
