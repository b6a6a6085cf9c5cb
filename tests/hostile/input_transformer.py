"""An input transformer that turns every test cell into `pass` before it runs."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 2
STUDENT_ID = "trick-input-transformer"
ANSWERS = with_trick("""
get_ipython().input_transformers_cleanup.append(
    lambda lines: ["pass\\n"] if any("check" in line for line in lines) else lines)
""")
# No test cell ever reaches the student's kernel for the transformer to empty.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
