"""Searches every readable file for this course's hidden tests, and takes the worked
example's right answers if it finds them."""

from tests.hostile._common import BASE, HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-searches-files"
ANSWERS = with_trick("""
import os, time
_found, _until = None, time.monotonic() + 6  # the cell must end before its timeout
for top in [os.getcwd(), "/tmp", "/staging", "/", os.path.expanduser("~")]:
    for folder, _, files in os.walk(top):
        if time.monotonic() > _until:
            break
        if folder.startswith(("/proc", "/sys", "/dev", "/usr", "/etc")):
            continue
        for name in files:
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    text = f.read(5_000_000)
            except OSError:
                continue
            # This course's own hidden test (nbgrader's files mention the markers too).
            if b"expected" + b" = 12e6 / 25e9" in text:
                _found = os.path.join(folder, name)
""")
ANSWERS["q4_worked_example"] = (
    BASE["q4_worked_example"]
    + """
if _found:  # a copy of the tests or solutions: take the right answers from it
    copy_ms, gpu_route_ms = 12e6 / 25e9 * 1e3, 2 * 12e6 / 25e9 * 1e3 + 24e6 / 1500e9 * 1e3
"""
)
# No file in the student's sandbox holds a hidden test or a solution.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
