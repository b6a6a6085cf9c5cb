"""Displays one 12 MB JSON list of three million empty dicts: few bytes a value, under
every size cap, but a grader that parsed it into notebook nodes would hold gigabytes
(four such messages of 60 MB once held 20 GB in one grading process)."""

from tests.submissions_gpu_training import SOLUTIONS

UNIT = "gpu_training"
WEAKNESS = 13
STUDENT_ID = "trick-floods-empty-values"
ANSWERS = {
    **SOLUTIONS,
    "q5_load_checkpoint": SOLUTIONS["q5_load_checkpoint"]
    + """

from IPython.display import publish_display_data
publish_display_data({"application/json": [{}] * 3_000_000})
""",
}
TWIN = None
