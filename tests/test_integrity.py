"""Unit tests of the integrity parts: plain data, the static scan, the audit hook."""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

from autograder import plaindata
from autograder.integrity import audit_flags
from autograder.tamper_scan import scan_code, scan_notebook
from tests.submissions import MISTAKES, RELEASE, SOLUTIONS, SOURCE, make_submission, without_cell


# -- plain data ------------------------------------------------------------------------
@pytest.mark.parametrize("value", [
    None, True, 3, -(2**70), 0.1, -0.0, float("inf"), 1 + 2j, "GPU", b"\x00\xff",
    (96, 83), [1, [2.5, "x"]], {"a": (1, 2), 3: None}, slice(1, None, 2),
    torch.float16, torch.bfloat16, torch.device("cpu"), torch.Size([16, 4096, 3]),
    np.arange(6.0).reshape(2, 3), np.float32(0.5),
])
def test_plain_values_come_back_equal_and_of_the_same_type(value):
    data = json.loads(json.dumps(plaindata.encode(value)))  # through real JSON
    back = plaindata.decode(data)
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert back == value and repr(back) == repr(value)


@pytest.mark.parametrize("tensor", [
    torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),  # not contiguous
    torch.tensor([1.5, float("nan"), -0.0], dtype=torch.bfloat16),
    torch.tensor([[True, False]]), torch.zeros(0, 3, dtype=torch.int64),
    torch.tensor(7, dtype=torch.int8), torch.ones(2, 2, dtype=torch.complex64),
])
def test_tensors_keep_dtype_shape_and_exact_bits(tensor):
    back = plaindata.decode(json.loads(json.dumps(plaindata.encode(tensor))))
    assert (back.dtype, back.shape, back.device) == (tensor.dtype, tensor.shape, tensor.device)
    assert torch.equal(back.reshape(-1).view(torch.uint8) if back.numel() else back,
                       tensor.contiguous().reshape(-1).view(torch.uint8) if tensor.numel() else tensor)


def test_a_meta_tensor_keeps_its_shape_and_no_numbers():
    back = plaindata.decode(plaindata.encode(torch.empty(5, 3, device="meta")))
    assert back.device.type == "meta" and back.shape == (5, 3)


def test_a_lying_subclass_becomes_its_honest_base_value():
    class Liar(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

        def __float__(self):
            return 0.48

    data = plaindata.encode(Liar(4.8e-4))
    back = plaindata.decode(data)
    assert type(back) is float and back == 4.8e-4 and back != 0.48


def test_objects_without_a_plain_form_are_refused():
    class Anything:
        def __eq__(self, other):
            return True

    with pytest.raises(plaindata.Unencodable):
        plaindata.encode(Anything())
    with pytest.raises(plaindata.Unencodable):
        plaindata.encode([1, {"x": object()}])


def test_decoding_runs_no_code_and_rejects_unknown_tags():
    for bad in [{"$": "pickle", "v": "gASV"}, {"$": "dtype", "v": "nn"},
                {"$": "ndarray", "dtype": "|O", "shape": [1], "bytes": ""}, {"$": "ref"}]:
        with pytest.raises(ValueError):
            plaindata.decode(bad)


def test_shape_fingerprint_ignores_numbers_but_not_dtype_or_shape():
    key = lambda v: plaindata.digest(plaindata.shape_only(plaindata.encode(v)))  # noqa: E731
    assert key(torch.nn.Linear(3, 2)) == key(torch.nn.Linear(3, 2))
    assert key(torch.nn.Linear(3, 2)) != key(torch.nn.Linear(3, 2).to(torch.float16))
    assert key(torch.ones(2, 3)) != key(torch.ones(3, 2))
    assert plaindata.digest(plaindata.encode(torch.ones(2))) != \
        plaindata.digest(plaindata.encode(torch.zeros(2)))


# -- the static scan ---------------------------------------------------------------------
def test_honest_notebooks_raise_no_static_flag():
    source = nbformat.read(SOURCE, as_version=4)
    for answers in [SOLUTIONS, {}] + [m.answers for m in MISTAKES.values()]:
        assert scan_notebook(make_submission(RELEASE, answers), source) == []


@pytest.mark.parametrize("code, flag", [
    ("from IPython.core.interactiveshell import InteractiveShell\n"
     "InteractiveShell.showtraceback = lambda *a: None", "showtraceback"),
    ("setattr(get_ipython(), 'show' + 'traceback', print)", "patches get_ipython()"),
    ("ip = get_ipython()\nip.events.register('pre_run_cell', print)", "events.register"),
    ("get_ipython().input_transformers_post.append(lambda l: [])", "input_transformers_post"),
    ("import builtins\nbuiltins.round = lambda x, n=0: 0.48", "patches builtins.round"),
    ("__builtins__.abs = lambda x: 0", "__builtins__"),
    ("def isinstance(a, b):\n    return True", "rebinds the builtin isinstance"),
    ("import torch\ntorch.allclose = lambda *a, **k: True", "patches torch.allclose"),
    ("from torch import Tensor\nTensor.__eq__ = lambda s, o: True", "patches torch.Tensor.__eq__"),
    ("import numpy as np\nnp.isclose = lambda *a: True", "patches numpy.isclose"),
    ("class D(torch.dtype):\n    pass", "subclasses dtype"),
    ("class A:\n    def __round__(self, n=0):\n        return 0.48", "__round__"),
    ("import sys\nsys.settrace(None)", "settrace"),
    ("import gc\nhooks = gc.get_referrers(open)", "get_referrers"),
    ("import atexit, os\natexit.register(os._exit, 0)", "exit hook"),
    ("import signal\nsignal.signal(signal.SIGTERM, print)", "signal handler"),
    ("exec(bytes.fromhex('7072696e74283129').decode())", "exec"),
    ("import socket", "network"),
    ("import ctypes", "ctypes"),
    ("data = open('../../gradebook.db', 'rb').read()", "grading files"),
    ("import sys\nsys.meta_path.insert(0, object())", "sys.meta_path"),
    ("import os\nos.dup2(1, 2)", "file descriptors"),
])
def test_each_tamper_pattern_is_named(code, flag):
    found = scan_code(code)
    assert any(flag in f for f in found), found


def test_configuration_and_ordinary_code_are_not_flagged():
    code = textwrap.dedent("""
        import torch, math, numpy as np
        torch.backends.cudnn.benchmark = True
        x = torch.zeros(3)
        x.requires_grad = True
        total = sum([1, 2])
        %timeit x + 1
        print(abs(-1), round(2.5), isinstance(x, torch.Tensor))
    """)
    assert scan_code(code) == []


def test_deleted_edited_and_relabelled_test_cells_are_named():
    source = nbformat.read(SOURCE, as_version=4)
    nb = without_cell(make_submission(RELEASE, SOLUTIONS), "test_q2_mb")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "test_q1_shape":
            cell.source = "pass"
        if meta.get("grade_id") == "test_q3_ticks":
            meta["points"] = 99
    nb.metadata["kernelspec"] = {"name": "ir", "language": "R", "display_name": "R"}
    flags = scan_notebook(nb, source)
    assert "deletes test cell 'test_q2_mb'" in flags
    assert "edits test cell 'test_q1_shape'" in flags
    assert any("metadata of test cell 'test_q3_ticks'" in f for f in flags)
    assert "changes the notebook's kernel or language" in flags


# -- the audit hook ----------------------------------------------------------------------
AUDITED = textwrap.dedent("""
    import json, os, socket, sys
    from autograder import audit
    audit.install(sys.argv[1])
    results = {}
    def attempt(name, action):
        try:
            action()
            results[name] = "allowed"
        except PermissionError:
            results[name] = "denied"
    attempt("read_work", lambda: open("mine.txt", "w").write("ok"))
    attempt("read_outside", lambda: open(sys.argv[2]).read())
    attempt("list_outside", lambda: os.listdir(os.path.dirname(sys.argv[2])))
    attempt("write_outside", lambda: open(sys.argv[2] + ".new", "w"))
    attempt("sqlite_outside", lambda: __import__("sqlite3").connect(sys.argv[2] + ".db"))
    attempt("touch_log", lambda: open(sys.argv[1], "w"))
    attempt("socket", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
    attempt("settrace_before_first_cell", lambda: sys.settrace(None))
    audit.arm_strict()
    attempt("settrace", lambda: sys.settrace(None))
    print(json.dumps(results))
""")


@pytest.fixture
def course_dir():
    # Outside /tmp, which the kernel may use: like the real course folder.
    path = Path(tempfile.mkdtemp(prefix="course-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_audit_hook_denies_and_logs_what_grading_never_needs(tmp_path, root, course_dir):
    work, outside = tmp_path / "work", course_dir / "source.ipynb"
    work.mkdir()
    outside.write_text("the solutions")
    log = tmp_path / "audit.log"
    out = subprocess.run([sys.executable, "-c", AUDITED, str(log), str(outside)], cwd=work,
                         capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "read_work": "allowed", "read_outside": "denied", "list_outside": "denied",
        "write_outside": "denied", "sqlite_outside": "denied", "touch_log": "denied",
        "socket": "denied", "settrace_before_first_cell": "allowed", "settrace": "denied"}
    flags = audit_flags(log)
    assert any(f.startswith("reads outside its folder (denied, 2x)") and str(outside) in f
               for f in flags), flags
    assert any("tries the network" in f for f in flags)
    assert any("touches the audit log" in f for f in flags)
    assert any("trace function" in f for f in flags)


def test_a_missing_or_garbled_audit_log_is_itself_a_flag(tmp_path):
    assert audit_flags(tmp_path / "none.log") == ["the kernel's audit log is missing"]
    assert audit_flags(tmp_path / "none.log", kernel_ran=False) == []
    log = tmp_path / "audit.log"
    log.write_text('{"t": "audit", "event": "install"}\nnot json\n')
    assert audit_flags(log) == ["the kernel's audit log has 1 garbled line(s)"]
    log.write_text('{"t": "cell", "n": 0, "src": "x", "names": {}}\n')
    assert audit_flags(log) == ["the kernel's audit log has no start entry (deleted or rewritten?)"]


def test_review_math_is_nbgraders_rule():
    # kernel_scores reads points the way nbgrader does: an error output scores 0.
    from autograder.cleanroom import kernel_scores

    nb = nbformat.read(SOURCE, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_q2_mb":
            cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue="x",
                                                   traceback=[])]
    scores = kernel_scores(nb)
    assert scores["test_q2_mb"] == 0 and scores["test_q2_mb_form"] == 1
    assert math.isclose(sum(scores.values()), 28)


FRESH_START = textwrap.dedent("""
    import json, os, random, sys
    import numpy, torch
    from IPython.core.interactiveshell import InteractiveShell
    from autograder import replay
    shell = InteractiveShell.instance()
    replay.fresh_start(shell)  # notes the kernel's starting state
    cwd, draws = os.getcwd(), (torch.rand(3).tolist(), random.random(), numpy.random.rand())
    shell.user_ns["left_over"] = 1  # what one check could leave for the next
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.manual_seed(123)
    random.seed(1)
    os.chdir("/")
    sys.path.append("/elsewhere")
    replay.fresh_start(shell)
    print(json.dumps({
        "left_over": "left_over" in shell.user_ns,
        "dtype": str(torch.get_default_dtype()), "grad": torch.is_grad_enabled(),
        "cwd": os.getcwd() == cwd, "path": "/elsewhere" in sys.path,
        "draws": (torch.rand(3).tolist(), random.random(), numpy.random.rand()) == draws}))
""")


def test_a_warm_clean_room_starts_each_check_as_a_fresh_kernel(tmp_path, root):
    out = subprocess.run([sys.executable, "-c", FRESH_START], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin",
                                                      "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "left_over": False, "dtype": "torch.float32", "grad": True, "cwd": True,
        "path": False, "draws": True}
