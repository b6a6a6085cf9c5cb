"""A function that returns the inputs it was given as the name of a runtime call, so that
a hidden test's message, which quotes the name it got, would carry the hidden trace (its
times are the hidden tests' expected values) into the feedback (attack 45, A1)."""

from tests.submissions_gpu_profiling import SOLUTIONS

UNIT = "gpu_profiling"
WEAKNESS = 15
STUDENT_ID = "trick-quotes-the-hidden-tests-inputs-in-its-result"
RETURNS = """
def host_waits(events):
    return [({name}, 1.0)]
"""
ANSWERS = {
    **SOLUTIONS,
    "q4_host_waits": RETURNS.format(
        name="'LEAK:' + ';'.join(f\"{e.get('name')}|{e.get('ts')}|{e.get('dur')}\" for e in events)"
    ),
}
TWIN = {**SOLUTIONS, "q4_host_waits": RETURNS.format(name="'LEAK:'")}
# Its feedback page holds no answer value that its twin's does not.
ECHOES_HIDDEN_INPUTS = True
