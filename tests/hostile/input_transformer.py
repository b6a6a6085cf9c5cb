"""An input transformer that turns every test cell into `pass` before it runs."""
from tests.hostile._common import with_trick

STUDENT_ID = "trick-input-transformer"
ANSWERS = with_trick('''
get_ipython().input_transformers_cleanup.append(
    lambda lines: ["pass\\n"] if any("check" in line for line in lines) else lines)
''')
# The tests never ran in the student's kernel, so no function call was recorded: only
# the tests of plain values can pass in the clean room (those of the right answers).
EXPECTED_SCORE = -1.0  # placeholder, measured
EXPECTED_FATE = "flagged"
EXPECTED_FLAG = "input_transformers_cleanup"
