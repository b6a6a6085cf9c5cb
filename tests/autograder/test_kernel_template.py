"""Test kernels forked from a template (issues 17 and 21): no process holds two
submissions' data, and the template never ran a cell.

Each test starts a real template in the test kernel's sandbox, as a grading worker does,
and forks kernels from it one after the other, as for two submissions.
"""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest
from traitlets.config import Config

from autograder.worker import trusted_kernel
from autograder.worker.outputs import OutputBudget

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    ),
]
UID = 61991 if os.geteuid() == 0 else -1


@pytest.fixture
def template(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    staging.chmod(0o755)
    (staging / "data.txt").write_text("the instructor's")
    (staging / "data.txt").chmod(0o644)
    config = Config()
    config.Sandbox.memory_mb = 2000
    kernel = trusted_kernel.TrustedKernel(config, staging, UID)
    yield kernel
    kernel.close()


def run_in_fresh_kernels(kernel, *cells: str) -> list[str]:
    """Run each cell in its own kernel, forked afresh (one per submission); their text."""

    async def go():
        texts = []
        for code in cells:
            session = await kernel.session(None, 60, OutputBudget(10**6, []))
            try:
                status, outputs = await session.execute(code)
                texts.append(
                    "".join(o.get("text", "") for o in outputs)
                    + "".join(
                        f"{o.get('ename')}: {o.get('evalue')}"
                        for o in outputs
                        if o.get("output_type") == "error"
                    )
                )
            finally:
                session.end()
        return texts

    return asyncio.run(go())


def test_a_second_submissions_kernel_sees_nothing_of_the_first(template):
    first, second = run_in_fresh_kernels(
        template,
        """
import os, sys, torch, autograder.bridge.trusted_side as side
open("/tmp/work/answers.txt", "w").write("ada's answers")
open("/tmp/elsewhere.txt", "w").write("ada's answers")
os.environ["ADA"] = "1"
side.MARK = "ada"
sys.modules["ada_module"] = side
leftover = bytearray(b"ADA-HEAP-MARKER" * 200_000)
secret = torch.full((1_000_000,), 7.0)
del leftover, secret
print(os.getpid(), sorted(os.listdir("/tmp/work")))
""",
        """
import os, sys, torch, autograder.bridge.trusted_side as side
print(os.getpid(), sorted(os.listdir("/tmp/work")), os.path.exists("/tmp/elsewhere.txt"),
      "ADA" in os.environ, hasattr(side, "MARK"), "ada_module" in sys.modules,
      bytes(torch.empty(4_000_000, dtype=torch.uint8).numpy()).count(b"ADA-HEAP"),
      int((torch.empty(1_000_000) == 7.0).sum()))
""",
    )
    assert "answers.txt" in first and "data.txt" in first
    assert second.split(" ", 1)[1] == "['data.txt'] False False False False 0 0\n", second


def test_the_template_never_runs_a_cell_and_keeps_one_thread(template):
    run_in_fresh_kernels(template, "import torch; x = torch.ones(1000) @ torch.ones(1000)")
    own = [p for p in template.km._own_processes.values() if p.is_running()]
    python = [p for p in own if "kernel_entry" in " ".join(p.cmdline())]
    assert python and python[-1].num_threads() == 1
    assert template.km.forked_kernels() == []  # the kernel is gone with its submission
    assert template.starts == 1 and template.uses == 1


def test_a_kernel_collects_its_own_garbage_and_never_walks_the_templates_objects(template):
    """The template freezes what it imported (``gc.freeze``) before forking; the kernel
    collects again, and a cycle of its own goes."""
    (text,) = run_in_fresh_kernels(
        template,
        """
import gc, weakref
class Node: pass
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
gc.collect()
print(gc.isenabled(), gc.get_freeze_count() > 100_000, gone() is None)
""",
    )
    assert text == "True True True\n", text


def test_a_template_that_dies_is_replaced_and_the_submission_withheld(template):
    """Only trusted code runs in a test kernel, but its template is not out of its reach
    (same uid, same sandbox): if it goes, that submission's points are withheld and the
    next submission gets a new template."""
    with pytest.raises(trusted_kernel.TrustedKernelProblem, match="died"):
        run_in_fresh_kernels(
            template,
            "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time; time.sleep(30)",
        )
    assert run_in_fresh_kernels(template, "print('fresh')") == ["fresh\n"]
    assert template.starts == 2


def test_each_kernel_gets_new_ports_and_a_new_key(template):
    keys = [template._connection()["key"] for _ in range(3)]
    ports = [template._connection()["shell_port"] for _ in range(3)]
    assert len(set(keys)) == 3 and len(set(ports)) == 3


def test_where_forking_is_not_safe_test_kernels_start_without_a_template(tmp_path):
    """A template with more than one thread (here OpenMP's pool, let grow by the
    environment) refuses to fork: each submission then gets a test kernel started as any
    kernel, and says so."""
    staging = tmp_path / "staging"
    staging.mkdir()
    staging.chmod(0o755)
    config = Config()
    config.SandboxMixin.extra_env = ["OMP_NUM_THREADS=4"]
    kernel = trusted_kernel.TrustedKernel(config, staging, UID)
    try:
        first, second = run_in_fresh_kernels(
            kernel, "import os; print(os.getpid())", "import os; print(os.getpid())"
        )
        assert first.strip().isdigit() and second.strip().isdigit()
        assert kernel.without_template and "thread" in kernel.without_template
        assert kernel.km is None  # each one went with its submission
    finally:
        kernel.close()


def test_kernel_templates_can_be_turned_off(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    staging.chmod(0o755)
    config = Config()
    config.Sandbox.kernel_templates = False
    kernel = trusted_kernel.TrustedKernel(config, staging, UID)
    try:
        assert run_in_fresh_kernels(kernel, "print('started')") == ["started\n"]
        assert "turned off" in kernel.without_template and kernel.starts == 1
    finally:
        kernel.close()


def test_a_line_the_template_did_not_write_says_nothing(caplog):
    """The host reads a template's `exit N PID STATUS CPU` and `forked N PID` lines: a line
    that does not parse is not the template's, and neither fills a fate nor stops the reading."""
    import types

    from autograder.sandbox.manager import SandboxedKernelManager

    read, write = os.pipe()
    os.set_blocking(read, False)
    os.write(
        write,
        b"exit 1 7 0 1.50\nexit x 3 y z\nforked 4 9\nexit 2 8 -9 much\nexit 3 10 152 2.25\n"
        b"exit 7 0 1.50\nforked 9\n",
    )
    km = SandboxedKernelManager()
    with os.fdopen(read, "rb") as out:
        km.__dict__["provisioner"] = types.SimpleNamespace(
            process=types.SimpleNamespace(stdout=out)
        )
        assert km.template_said() == {1: 0, 3: 152}
        assert km.template_cpu() == {1: 1.5, 3: 2.25}
        assert km.fork_number(9) == 4
    os.close(write)
    assert "not its own" in caplog.text


def test_a_kernel_with_an_earlier_kernels_pid_is_told_by_its_fork(caplog):
    """A kernel can use up the sandbox's pids (32768 here) until the template's next child
    gets its own pid back. That child is told by its fork's number: the earlier kernel's
    exit is not its exit, and its fork has not failed."""
    import types

    from autograder.sandbox.manager import SandboxedKernelManager

    read, write = os.pipe()
    os.set_blocking(read, False)
    km = SandboxedKernelManager()
    with os.fdopen(read, "rb") as out:
        km.__dict__["provisioner"] = types.SimpleNamespace(
            process=types.SimpleNamespace(stdout=out)
        )
        os.write(write, b"forked 1 7\nexit 1 7 -9 30.00\nforked 2 7\n")
        assert km.template_said() == {1: -9}
        assert km.fork_number(7) == 2 and not km._fork_failed(1)
        os.write(write, b"exit 2 7 0 0.50\n")
        assert km.template_said() == {1: -9, 2: 0} and km.template_cpu()[2] == 0.5
        assert km._fork_failed(1)
    os.close(write)
