"""An input transformer that turns every test cell into `pass` before it runs."""
from tests.hostile._common import with_trick

STUDENT_ID = "trick-input-transformer"
ANSWERS = with_trick('''
get_ipython().input_transformers_cleanup.append(
    lambda lines: ["pass\\n"] if any("check" in line for line in lines) else lines)
''')
# The tests never ran in the student's kernel (30 points there), so no function call was
# recorded: only the tests of plain values with right answers pass in the clean room
# (q1_second_problem 2, q2_mb 1+2, q3_ticks 1+2, q4_dtypes 2, q4 form 1), 11 < HONEST_SCORE.
EXPECTED_SCORE = 11.0
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "input_transformers_cleanup"
