"""steady_state returns a 40-million-character stage name: the test's failure message
quotes it, and a message over the grader's size limit would cut the grader off from the
trusted test kernel, withholding every later test's points."""

from tests.submissions_gpu_data_loading import SOLUTIONS

UNIT = "gpu_data_loading"
WEAKNESS = 13
STUDENT_ID = "trick-huge-string-answer"
ANSWERS = {
    **SOLUTIONS,
    "q4_steady_state": SOLUTIONS["q4_steady_state"]
    + """

_honest_steady_state = steady_state
_STAGE = "x" * 40_000_000

def steady_state(stage_ms, workers, overlap):
    ms, _ = _honest_steady_state(stage_ms, workers, overlap)
    return ms, _STAGE
""",
}
TWIN = None
COSTLY = True  # the report names the refused answer
