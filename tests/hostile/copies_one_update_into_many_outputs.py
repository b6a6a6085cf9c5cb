"""Shows 300 error outputs under one display id (nbclient files any output with a display
id under it, whatever its kind, and the rewrites' count ignored them), then sends one
update of 100 kB: nbclient copies the update's data into every output shown under the id,
30 MB in a notebook whose outputs may hold 1 MB. Outside attack 39: 1,900 such outputs and
an update of 0.85 MB made a graded notebook of 1.6 GB and a grading process of 10 GB.
Each copy now costs the update's bytes against the output budget."""

from tests.hostile._common import HONEST_SCORE, WAIT_WHEN_FULL, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-copies-one-update-into-many-outputs"
ANSWERS = with_trick(
    WAIT_WHEN_FULL
    + """
from IPython.display import update_display
_k = get_ipython().kernel
_parent = _k.get_parent("shell")
for _i in range(300):
    _k.session.send(
        _k.iopub_socket, "error",
        {"ename": "E", "evalue": "", "traceback": [], "transient": {"display_id": "amp"}},
        parent=_parent, ident=b"error",
    )
update_display({"text/plain": "A" * 100_000}, raw=True, display_id="amp")
del _k, _parent, _i
"""
)
# The answers stand; the update is dropped with the output budget's own note.
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = "output over 1 MB dropped"
