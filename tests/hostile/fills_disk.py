"""Writes files until the disk is full, then goes on with its answers."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-fills-disk"
ANSWERS = with_trick("""
import os
_n = 0
try:
    while _n < 100:
        with open(f"filler-{_n}.bin", "wb") as f:
            f.write(b"x" * 10_000_000)
        _n += 1
except OSError:
    pass
for _ in range(5):
    try:
        os.remove(f"filler-{_n - 1}.bin")
        _n -= 1
    except OSError:
        break
""")
# Its working folder is a tmpfs of Sandbox.disk_mb: the writes stop there, and nothing of
# it ever reaches autograded/ (asserted for the whole class).
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
