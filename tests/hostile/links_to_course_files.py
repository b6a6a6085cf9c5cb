"""Plants links where the grader might write or read after the kernel ends: the notebook
being graded, the gradebook, the source notebook, another student's work."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 1
STUDENT_ID = "trick-links-to-course-files"
ANSWERS = with_trick("""
import os
for name, target in [("gpu_tensors.ipynb", "@COURSE@/source/gpu_tensors/gpu_tensors.ipynb"),
                     ("gradebook.db", "@COURSE@/gradebook.db"),
                     ("ada.ipynb", "@COURSE@/submitted/ada/gpu_tensors/gpu_tensors.ipynb"),
                     ("sentinel", "@SENTINEL@")]:
    for folder in [os.getcwd(), "/tmp", os.path.expanduser("~")]:
        try:
            path = os.path.join(folder, name)
            if os.path.lexists(path):
                os.remove(path)
            os.symlink(target, path)
        except OSError:
            pass
""")
# The kernel works in a tmpfs of its own; the grader never reads or writes there.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
