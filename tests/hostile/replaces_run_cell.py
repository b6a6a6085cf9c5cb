"""Replaces the shell's run_cell_async so that every test cell runs as `pass`."""
from tests.hostile._common import with_trick

STUDENT_ID = "trick-replaces-run-cell"
ANSWERS = with_trick('''
_shell = get_ipython()
_original = _shell.run_cell_async

async def _run_cell_async(raw_cell, *args, **kwargs):
    if "check" in raw_cell:
        raw_cell = "pass"
    return await _original(raw_cell, *args, **kwargs)

_shell.run_cell_async = _run_cell_async
''')
# No test cell ran as written in the student's kernel: none can pass in the clean room.
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "run_cell_async"
