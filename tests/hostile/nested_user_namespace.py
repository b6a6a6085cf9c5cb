"""Makes a user namespace of its own inside the sandbox, where it would hold every
capability and could remount the filesystem; records whether it could."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 9
STUDENT_ID = "trick-nested-user-namespace"
ANSWERS = with_trick("""
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
_nested = _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0
""")
# Had it worked, the worked example would have been answered right.
ANSWERS["q4_worked_example"] = (
    BASE["q4_worked_example"]
    + """
if _nested:
    copy_ms, gpu_route_ms = 0.48, 0.976
"""
)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
