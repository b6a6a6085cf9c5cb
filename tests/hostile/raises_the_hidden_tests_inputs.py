"""A function that raises with the inputs it was given, so that a hidden test's failure
message would carry them into the feedback: the hidden trace's times are the hidden
tests' expected values (attack 43, L1)."""

from tests.submissions_gpu_profiling import SOLUTIONS

UNIT = "gpu_profiling"
WEAKNESS = 15
STUDENT_ID = "trick-raises-the-hidden-tests-inputs"
RAISES = """
def host_waits(events):
    raise ValueError({message})
"""
# The runtime calls' durations: short enough to pass whole in one message.
ANSWERS = {
    **SOLUTIONS,
    "q4_host_waits": RAISES.format(
        message="repr([e.get('dur') for e in events if e.get('cat') == 'cuda_runtime'])"
    ),
}
TWIN = {**SOLUTIONS, "q4_host_waits": RAISES.format(message="'not done'")}
# Its feedback page holds no answer value that its twin's does not.
ECHOES_HIDDEN_INPUTS = True
