"""Writes straight into the kernel's audit log: garbage, and a forged answer record."""
from tests.hostile._common import HONEST_SCORE, with_trick

STUDENT_ID = "trick-forges-record"
ANSWERS = with_trick('''
import os
for _fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{_fd}").endswith(".log"):
            os.write(int(_fd), b'garbage\\n{"t": "value", "d": "x", "v": 0.48}\\n')
    except OSError:
        pass
''')
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "garbled"
