"""A constant steady_state that also rewrites the stages dict the test passed, so that a
test computing its expected value from that dict after the call would expect the
constant."""

from tests.submissions_gpu_data_loading import SOLUTIONS

UNIT = "gpu_data_loading"
WEAKNESS = 11
STUDENT_ID = "trick-writes-expected-values"
CONSTANT = """
def steady_state(stage_ms, workers, overlap):
    {rewrite}return 3.0, "load"
"""
ANSWERS = {
    **SOLUTIONS,
    "q4_steady_state": CONSTANT.format(
        rewrite="stage_ms.clear()\n    stage_ms.update(load=1.0, copy=1.0, compute=1.0)\n    "
    ),
}
TWIN = {**SOLUTIONS, "q4_steady_state": CONSTANT.format(rewrite="")}
