"""An answer cell that fails with a 20 MB error message, which the reply carries as well
as the output."""

from tests.hostile._common import BASE, HONEST_SCORE

WEAKNESS = 5
STUDENT_ID = "trick-error-reply-flood"
ANSWERS = {
    **BASE,
    "q1_second_problem": """
second_problem = "B"
raise RuntimeError("w" * 20_000_000)
""",
}
# The cell's own error costs nothing (second_problem was set first); the notebook stays
# within the output cap.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "output over 1 MB dropped"
