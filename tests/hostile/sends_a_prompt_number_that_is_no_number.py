"""Sends its own IOPub messages with an ``execution_count`` that is a string: nbclient
copies it into the cell from any message, and nbformat then refused the autograded
notebook, so the submission's fate was ``error`` (the grader's own failure, graded again on
every run, with no score in any export); a status message, which the output budget never
counts, carried 50 MB of it per cell, all kept by the worker (2.4 GB for 40 cells:
attack 30). The grader keeps only what nbclient reads of a status or an input, drops a
prompt number that is no number, and grades the rest."""

from tests.hostile._common import HONEST_SCORE, with_trick

WEAKNESS = 5
STUDENT_ID = "trick-sends-a-prompt-number-that-is-no-number"
ANSWERS = with_trick("""
_k = get_ipython().kernel
def _send(kind, body):
    _k.session.send(_k.iopub_socket, kind, body, parent=_k.get_parent(), ident=kind.encode())
_send("status", b'{"execution_state": "busy", "execution_count": "' + b"x" * 200_000 + b'"}')
_send("execute_input", b'{"code": "", "execution_count": "not a number"}')
_send("execute_result", {"data": {"text/plain": "1"}, "metadata": {}, "execution_count": -5})
del _k, _send
""")
EXPECTED_SCORE = HONEST_SCORE
EXPECTED_FATE = "graded"
EXPECTED_DETAIL = None
