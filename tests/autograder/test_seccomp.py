"""The system call filter every sandboxed kernel installs (``autograder.sandbox.seccomp``),
tried in a process of its own: what it refuses, what it lets through, and that nothing
a kernel starts escapes it. The kernels' own tries are in test_sandbox.py and
test_student_kernel_template.py."""

from __future__ import annotations

import platform
import signal
import subprocess
import sys

import pytest

from autograder.sandbox import seccomp
from tests.autograder.memory_probe import REFUSED, TRY_UNCOUNTED

pytestmark = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "aarch64"), reason="a machine the filter knows"
)


def filtered(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from autograder.sandbox import seccomp\nseccomp.install()\n" + code,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_filtered_process_and_its_children_pin_nothing_uncounted_and_have_unix_sockets():
    child = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {TRY_UNCOUNTED!r}])"
    for code in (TRY_UNCOUNTED, child):
        done = filtered(code)
        assert done.returncode == 0, done.stderr
        tried = eval(done.stdout)  # noqa: S307 - our own probe's dict
        tried.pop("loopback up")
        assert tried == REFUSED


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x32 system calls are x86_64's")
def test_a_system_call_of_another_abi_kills_the_process():
    """x32 numbers are the same with one bit set: the filter, which checks the machine's
    own numbers, kills whoever uses another ABI's rather than let a socket through."""
    done = filtered(
        "import ctypes\nctypes.CDLL(None).syscall(0x40000000 | 41, 16, 3, 2)\nprint('alive')"
    )
    assert done.returncode == -signal.SIGSYS and "alive" not in done.stdout


def test_a_machine_the_filter_does_not_know_runs_no_kernel():
    with pytest.raises(OSError, match="no system call filter for a riscv64 machine"):
        seccomp.program("riscv64")


def test_a_filtered_process_sets_its_own_limits_and_no_other_process_s():
    """Outside attack 59: a kernel set its template's limits (same uid), and every later
    kernel inherited them. Under the filter a process sets its own, as glibc does
    (``prlimit64`` with pid 0), and no other's, not even its parent's."""
    done = filtered(
        "import os, resource, subprocess, sys\n"
        "resource.setrlimit(resource.RLIMIT_MSGQUEUE, (4242, 4242))\n"
        "child = 'import os, resource\\n"
        "try:\\n"
        "    resource.prlimit(os.getppid(), resource.RLIMIT_MSGQUEUE, (7, 7))\\n"
        '    print("set")\\n'
        "except PermissionError:\\n"
        '    print("refused")\'\n'
        "out = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True)\n"
        "print(out.stdout.strip(), resource.getrlimit(resource.RLIMIT_MSGQUEUE))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "(4242,", "4242)"]
