"""A function that, once called by a test, sends its own call's reply on the shell
channel (the id of the call's request is its kernel's parent), ignores the interrupt and
runs on. The grader took a reply to the call as proof that the interrupt stopped it, and
kept using a kernel still busy in the old call: each later call waited out its time too
(attack 35). Now only the reply to a request sent after the interrupt, with a random id,
proves it; none comes, and the kernel is stopped for good at the first timeout."""

from tests.hostile._common import with_trick

WEAKNESS = 5
STUDENT_ID = "trick-forges-its-calls-reply-and-runs-on"
ANSWERS = with_trick("""
import signal, time
def prepare_batch(batch, model):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    k = get_ipython().kernel
    stream = getattr(k, "shell_stream", None) or k.shell_streams[0]
    k.session.send(stream.socket, "course_grade_reply", {"status": "ok"},
                   k.get_parent("shell"), k._parent_ident["shell"])
    while True:
        time.sleep(0.05)
""")
EXPECTED_SCORE = 0.0
EXPECTED_FATE = "timed out"
EXPECTED_DETAIL = [  # one call timed out, not two (before: a second waited out its time)
    "kernel stopped (a test's call): a function of yours did not stop when its time was up;"
    " later cells scored 0",
    "timed out: (a test's call)",
]
