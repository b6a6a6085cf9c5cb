"""A background thread that watches the input history and the globals while tests run,
for the tests' own variables ("expected") and code."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-history-and-globals"
ANSWERS = with_trick("""
import threading, time
_leaks = []

_markers = ("BEGIN HIDDEN" + " TESTS", "expected" + " = 12e6")  # not this cell's own text

def _watch():
    ip = get_ipython()
    for _ in range(2000):
        for text in list(ip.user_ns.get("In", [])) + list(ip.history_manager.input_hist_raw):
            if any(marker in text for marker in _markers):
                _leaks.append(text)
        if "expected" in ip.user_ns:
            _leaks.append(repr(ip.user_ns["expected"]))
        time.sleep(0.005)

threading.Thread(target=_watch, daemon=True).start()
""")
ANSWERS["q4_worked_example"] = (
    BASE["q4_worked_example"]
    + """
if _leaks:
    copy_ms, gpu_route_ms = 0.48, 0.976
"""
)
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
