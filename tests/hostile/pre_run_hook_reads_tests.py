"""Registers a pre-run hook ahead of everything, to read each test cell's raw text and
copy the expected values it finds into the answers."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-pre-run-hook"
ANSWERS = with_trick("""
import re
_seen = []

def _read(info):
    raw = getattr(info, "raw_cell", "") or ""
    _seen.append(raw)
    if ("BEGIN HIDDEN" + " TESTS") in raw or ("expected" + " = 12e6") in raw:
        globals()["_leak"] = raw

get_ipython().events.callbacks["pre_run_cell"].insert(0, _read)
""")
ANSWERS["q4_worked_example"] = (
    BASE["q4_worked_example"]
    + """
if "_leak" in globals():
    copy_ms, gpu_route_ms = 0.48, 0.976
"""
)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
