"""Replaces the shell's run_cell_async so that every test cell runs as `pass`."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-replaces-run-cell"
ANSWERS = with_trick("""
_shell = get_ipython()
_original = _shell.run_cell_async

async def _run_cell_async(raw_cell, *args, **kwargs):
    if "check" in raw_cell:
        raw_cell = "pass"
    return await _original(raw_cell, *args, **kwargs)

_shell.run_cell_async = _run_cell_async
""")
# Only the student's own cells run through the replaced run_cell_async.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
