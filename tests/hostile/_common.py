"""Shared by the trick submissions in this folder (files starting with _ are not cases).

A case is one trick, as a student who wants points would try it. Each file says which
weakness it attacks (``WEAKNESS``: 1-9 of issue 8, see ``WEAKNESSES``; 10-15:
attacks on the trusted side in the later units, see ``TRUSTED_SIDE``) and either

- is a notebook: ``STUDENT_ID``, ``ANSWERS`` (answer cell -> code) or ``transform(nb)``,
  ``EXPECTED_SCORE``, ``EXPECTED_FATE`` and, optionally, ``EXPECTED_DETAIL`` (words the
  report's details must hold, or a list: the details, all of them, in order); or
- places files itself: ``place(inbox)`` (an LMS zip entry, an inbox folder entry, an
  nbgrader exchange folder; see ``tests.class_fixture.Inbox``) and ``EXPECTED``
  (student -> (score, fate)).

What every case must not achieve is asserted for the whole class at once
(``tests/autograder/test_pipeline.py``): source/, release/, the gradebook's assignment tables,
other students' files and a sentinel file outside the course stay byte-identical, the
batch completes, no feedback page carries a script or a hidden test.

Notebook tricks sit in the first answer cell, after a correct prepare_batch, so they run
before every test; the rest of the notebook is the "seconds" mistake (the worked example
in seconds, which fails test_q4_copy_ms and test_q4_gpu_route). An honest student with
these answers scores HONEST_SCORE; a trick that gains nothing scores at most that.
Code may name ``@SENTINEL@`` and ``@COURSE@``: the class fixture puts in the real paths
of a file outside the course and of the course folder, as a student who guessed them would.
"""

from tests.submissions_gpu_tensors import MISTAKES, SOLUTIONS

BASE = MISTAKES["seconds"].answers
HONEST_SCORE = MISTAKES["seconds"].score
WEAKNESSES = {
    1: "host code follows what the kernel left in its folder",
    2: "hidden tests visible inside the student's kernel",
    3: "the student controls the answer record",
    4: "the review fails open",
    5: "limits that do not hold",
    6: "imports can be hijacked",
    7: "feedback HTML carries the student's script",
    8: "hidden-test source printed into the student's own feedback",
    9: "forged nbgrader metadata; nested user namespaces",
}
TRUSTED_SIDE = {
    10: "the test kernel's memory read back through forged or partial data",
    11: "the test's own objects, from which it computes expected values, written",
    12: "a student's words filed in the class report as the tests' hints",
    13: "data that chooses imports, or unbounded work, in the trusted kernel",
    14: "what the record of a call's copies and reads does not see (the dispatch modes "
    "switched off, a decoy copy)",
    15: "a hidden test's inputs, which the student's function is given, carried into the "
    "feedback in what the function says",
}


def unit_tricks(unit: str) -> list:
    """The trick modules of ``unit`` (those of tests/hostile that name it)."""
    from tests.class_fixture import hostile_modules

    return [m for m in hostile_modules(unit)]


# Trick code that makes its kernel's output socket wait when its queue is full instead of
# dropping (zmq's XPUB_NODROP, set on the IOPub thread, which owns the socket): a flood
# then reaches the grader in full however slowly a loaded machine reads it.
WAIT_WHEN_FULL = """
import threading as _threading, zmq as _zmq
_iopub, _set = get_ipython().kernel.iopub_thread, _threading.Event()
def _wait_when_full():
    _iopub.socket.setsockopt(_zmq.XPUB_NODROP, 1)
    _set.set()
_iopub.io_loop.add_callback(_wait_when_full)
_set.wait(5)
del _threading, _zmq, _iopub, _set, _wait_when_full
"""


def with_trick(trick: str, cell: str = "q1_prepare_batch", base=None) -> dict:
    answers = dict(base or BASE)
    answers[cell] = SOLUTIONS[cell] + "\n\n" + trick.strip() + "\n"
    return answers


def with_a_cell_of_no_role(grade_id: str):
    """A notebook of BASE answers with one more code cell whose nbgrader metadata names
    ``grade_id`` and gives it no role (grade, solution and locked all false)."""
    import nbformat

    from tests.submissions_gpu_tensors import make_submission

    nb = make_submission(answers=BASE)
    cell = nbformat.v4.new_code_cell("notes = 'my own working'")
    cell.metadata["nbgrader"] = {
        "grade_id": grade_id,
        "grade": False,
        "solution": False,
        "locked": False,
        "schema_version": 3,
    }
    nb.cells.append(cell)
    return nb


def reading_the_loss(hide: str) -> str:
    """gpu_training's train_step (the solution's step) that reads the loss on the host every
    step, a GPU sync each time, with ``Tensor.item`` as it was before any record's wrappers,
    inside ``with <hide>:``: the tricks that hide a read from the record differ only there."""
    from tests.submissions_gpu_training import STEP, _train_step

    return "_item = torch.Tensor.item\n_history = []\n\n" + _train_step(
        *STEP,
        f"with {hide}:",
        "    try:",
        "        _history.append(_item(loss))  # a read on the host, every step",
        "    except Exception:",
        "        pass  # meta has no value",
        "return loss.detach()",
    )
