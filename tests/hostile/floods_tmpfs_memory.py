"""Holds its memory in /tmp and /dev/shm, where a process's resident memory does not show
it, on top of what it holds in its own process."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-floods-tmpfs-memory"
ANSWERS = with_trick(
    """
import os
_held = b"x" * 700_000_000  # resident, under the test limit of 1500 MB
for folder, size in [("/dev/shm", 240), ("/tmp", 500)]:
    for part in range(size // 100 + 1):  # files of 100 MB: under the largest-file limit
        try:
            with open(os.path.join(folder, f"hoard{part}"), "wb") as f:
                for _ in range(min(100, size - 100 * part)):
                    f.write(b"x" * 1_000_000)
        except OSError:
            break
import time
time.sleep(3)
""",
    cell="q4_worked_example",
    base=BASE,
)
# 700 MB resident + 740 MB in its tmpfs folders: over 1500 MB counted together, so the
# kernel is killed in that cell: its tests and the ones after it score 0.
EXPECTED_SCORE = HONEST_SCORE - 1.0  # test_q4_worked_example_form, which passed honestly
EXPECTED_FATE = "killed for memory"
