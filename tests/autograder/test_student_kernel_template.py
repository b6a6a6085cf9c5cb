"""Students' kernels forked from a template (issues 17 and 21): the second submission's
kernel sees nothing of the first, no kernel can read or write its template, and a
template a kernel stopped is replaced.

Each test forks real kernels from a real template in the student kernel's sandbox, as a
grading worker does for one submission after another.
"""

from __future__ import annotations

import ast
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.worker import student_kernels
from autograder.worker.student_kernels import ForkedKernelManager
from tests.autograder.memory_probe import REFUSED, TRY_UNCOUNTED

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None,
        reason="needs bubblewrap (scripts/setup --system installs it)",
    ),
]
# A uid and a slot of this file's own (RLIMIT_NPROC counts every process of a uid): one for
# each pytest-xdist worker, since `--dist load` can run two of this file's tests at once
# (the process-limit tests then counted each other's kernels; scripts/run-tests keeps a
# file in one worker).
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
UID = 61992 - 20 * _WORKER if os.geteuid() == 0 else -1
SLOT = 97 - _WORKER  # a slot no grading thread of the suite uses


def staged(tmp_path: Path, name: str, text: str) -> Path:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    folder.chmod(0o755)
    (folder / name).write_text(text)
    (folder / name).chmod(0o644)
    return folder


def run(
    cells: list[str], staging: Path, preload=(), **sandbox
) -> tuple[list[str], ForkedKernelManager]:
    """Run a notebook in a forked student kernel: each cell's text, and the manager."""
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    config = Config()
    config.SandboxMixin.uid, config.SandboxMixin.slot = UID, SLOT
    config.SandboxMixin.preload = list(preload)
    config.SandboxMixin.staging = str(staging)
    config.SandboxMixin.runtime_root = tempfile.mkdtemp(prefix="cg-t", dir="/tmp")
    os.chmod(config.SandboxMixin.runtime_root, 0o755)
    for name, value in sandbox.items():
        setattr(config.Sandbox, name, value)
    client = NotebookClient(
        nb, kernel_manager_class=ForkedKernelManager, config=config, timeout=60, allow_errors=True
    )
    kept = {}
    client.on_notebook_start = lambda notebook: None
    original = client.async_start_new_kernel

    async def start(**kw):
        await original(**kw)
        kept["km"] = client.km

    client.async_start_new_kernel = start
    try:
        client.execute()
    except DeadKernelError:
        pass  # the test looks at how it ended
    finally:
        shutil.rmtree(config.SandboxMixin.runtime_root, ignore_errors=True)
    texts = [
        "".join(
            o.get("text", "") or f"{o.get('ename', '')}: {o.get('evalue', '')}" for o in c.outputs
        )
        for c in nb.cells
    ]
    return texts, kept["km"]


@pytest.fixture(autouse=True)
def templates():
    yield
    student_kernels.close_all()


def test_the_kernel_is_forked_with_torch_loaded_and_only_its_own_files(tmp_path):
    texts, km = run(
        ["import sys, os; print('torch' in sys.modules, sorted(os.listdir('.')))"],
        staged(tmp_path, "mine.txt", "A"),
    )
    assert km.without_template is None
    assert texts == ["True ['mine.txt']\n"]


def test_a_kernel_is_forked_from_a_template_that_imported_what_its_assignment_preloads(
    tmp_path,
):
    cell = ["import sys; print('colorsys' in sys.modules)"]
    plain, km = run(cell, staged(tmp_path, "mine.txt", "A"))
    assert km.without_template is None and plain == ["False\n"]
    preloaded, km = run(cell, staged(tmp_path, "mine.txt", "A"), preload=["colorsys"])
    assert km.without_template is None and preloaded == ["True\n"]
    # A module that is not there: no template can start, and the kernel starts as any kernel.
    texts, km = run(cell, staged(tmp_path, "mine.txt", "A"), preload=["no_such_module_here"])
    assert "could not start" in (km.without_template or "") and texts == ["False\n"]


def test_a_second_submissions_kernel_sees_nothing_of_the_first(tmp_path):
    plant = [
        "import os, sys, json, subprocess\n"
        "open('/tmp/planted', 'w').write('x'); open('/dev/shm/planted', 'w').write('x')\n"
        "os.environ['PLANTED'] = '1'; sys.modules['planted'] = json\n"
        "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "secret = 'first-' + 'submission-' * 3; print('planted')",
    ]
    texts, _ = run(plant, staged(tmp_path, "first.txt", "A"))
    assert texts == ["planted\n"]
    harvest = [
        "import os, sys, subprocess\n"
        "print(os.path.exists('/tmp/planted'), os.path.exists('/dev/shm/planted'),\n"
        "      os.environ.get('PLANTED'), 'planted' in sys.modules, 'secret' in globals(),\n"
        "      sorted(os.listdir('.')))",
        "print([l for l in subprocess.run(['ps', '-eo', 'args'], capture_output=True,\n"
        "      text=True).stdout.splitlines() if 'sleep' in l])",
    ]
    texts, km = run(harvest, staged(tmp_path, "second.txt", "B"))
    assert km.without_template is None
    assert texts == ["False False None False False ['second.txt']\n", "[]\n"]


ZOMBIE_LEADER = """
import ctypes, os, threading, time
if os.fork():
    os._exit(0)
def write():
    while True:  # whole or not at all: a reader never sees the file just truncated
        open('/tmp/zombie.part', 'w').write(str(os.getpid()))
        os.replace('/tmp/zombie.part', '/tmp/zombie')
        time.sleep(0.02)
threading.Thread(target=write).start()
time.sleep(0.3)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread alone
"""


# add_key and keyctl (x86_64): a key in the uid's user keyring (-4), searched for by name (10);
# the uid's persistent keyring (22), linked into the session keyring (-3)
ADD_KEY, KEYCTL, GET_PERSISTENT = 248, 250, 22


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the planted keys use x86_64 calls")
def test_nothing_a_kernel_locks_or_keeps_running_reaches_the_next(tmp_path):
    """What outside attackers did: an IPython startup file in folders made read-only
    (HOME is /tmp), a locked folder in /dev/shm, a System V shared memory segment, a POSIX
    message queue and a key in the uid's keyring and in its persistent keyring (which
    outlives every process of the uid) left for a later kernel, and a chain of
    processes that fork and exit, always a step ahead of a list of pids."""
    plant = [
        "import os, ctypes, time\n"
        "start = '/tmp/.ipython/profile_default/startup'\n"
        "os.makedirs(start, exist_ok=True)\n"
        "open(start + '/00-x.py', 'w').write('STARTUP_RAN = True\\n')\n"
        "os.chmod(start, 0o555); os.chmod('/tmp/.ipython/profile_default', 0o555)\n"
        "os.makedirs('/dev/shm/locked/in'); open('/dev/shm/locked/in/f', 'w').write('x')\n"
        "os.chmod('/dev/shm/locked/in', 0); os.chmod('/dev/shm/locked', 0o555)\n"
        "print(ctypes.CDLL(None).shmget(0x5EED, 4096, 0o1600) >= 0)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "q = libc.mq_open(b'/classnote', os.O_CREAT | os.O_RDWR, 0o600, None)\n"
        "libc.mq_send(q, b'from ada', 8, 0)\n"
        f"libc.syscall({ADD_KEY}, b'user', b'classnote', b'from ada', 8, -4)\n"
        f"kept = libc.syscall({KEYCTL}, {GET_PERSISTENT}, -1, -3)  # lives on after its uid's processes\n"
        f"libc.syscall({ADD_KEY}, b'user', b'classnote', b'from ada', 8, kept)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    end = time.time() + 60\n"
        "    while time.time() < end:\n"
        "        if os.fork() != 0:\n"
        "            os._exit(0)\n"
        "        open('/tmp/chain', 'w').write(str(os.getpid()))\n"
        "        time.sleep(0.002)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5); print(os.path.exists('/tmp/chain'))",
    ]
    # A process whose first thread ends on its own (a raw exit system call) shows as a
    # zombie while its other thread runs on (a later outside attacker's).
    plant.append(
        "import subprocess, sys, time\n"
        f"stray = subprocess.Popen([sys.executable, '-c', {ZOMBIE_LEADER!r}], start_new_session=True)\n"
        "time.sleep(1)\n"
        "pid = int(open('/tmp/zombie').read())\n"
        "print(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0])"
    )
    texts, _ = run(plant, staged(tmp_path, "first.txt", "A"))
    assert texts == ["True\nTrue\n", "Z\n"]
    harvest = [
        "import os, time\n"
        "time.sleep(1)\n"
        "def parent(pid):\n"
        "    return int([l for l in open(f'/proc/{pid}/status') if l.startswith('PPid')][0].split()[1])\n"
        "mine, pid = set(), os.getpid()\n"
        "while pid > 1:\n"
        "    mine.add(pid); pid = parent(pid)\n"
        "print(os.path.exists('/tmp/chain') or os.path.exists('/tmp/zombie')\n"
        "      or os.path.exists('/tmp/zombie.part'),\n"
        "      os.path.exists(start := '/tmp/.ipython/profile_default/startup/00-x.py'),\n"
        "      os.listdir('/dev/shm'), len(open('/proc/sysvipc/shm').readlines()) - 1,\n"
        "      'STARTUP_RAN' in globals(),\n"
        "      os.listdir('/dev/mqueue'),\n"
        f"      __import__('ctypes').CDLL(None).syscall({KEYCTL}, 10, -4, b'user', b'classnote', 0) > 0,\n"
        f"      __import__('ctypes').CDLL(None).syscall({KEYCTL}, 10,\n"
        f"          __import__('ctypes').CDLL(None).syscall({KEYCTL}, {GET_PERSISTENT}, -1, -3),\n"
        "          b'user', b'classnote', 0) > 0,\n"
        "      [p for p in os.listdir('/proc') if p.isdigit() and int(p) not in mine\n"
        "       and os.stat('/proc/' + p).st_uid == os.getuid()])",
    ]
    texts, km = run(harvest, staged(tmp_path, "second.txt", "B"))
    assert km.without_template is None
    assert texts == ["False False [] 0 False [] False False []\n"], texts


# Every descriptor a kernel holds, but character devices (/dev/null) and anonymous inodes
# (each epoll or eventfd of every process is the one inode of anon_inodefs): its file's
# device, inode and kind, and the size it sees.
DESCRIPTORS = """
import os, stat
held = {}
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    if not stat.S_ISCHR(st.st_mode) and stat.S_IFMT(st.st_mode):
        held[fd] = (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), st.st_size)
"""


def test_no_descriptor_of_a_kernel_is_held_by_the_next(tmp_path):
    """Outside attack 56: every forked kernel held the template's log (its stdout and
    stderr, and ipykernel's copies of them), a host file that outlives each kernel. A
    write-only descriptor was enough to pass a note: the first kernel punched holes in it,
    or set its size, and the next read them with lseek and fstat; or filled it to the
    file-size limit, so that the next kernel could not start from the template. No kernel
    now holds a descriptor that a later kernel holds too, and whatever the first does to
    any of its own, the next starts from the template."""
    plant = [
        DESCRIPTORS + "for fd, (_, _, kind, _) in held.items():\n"
        "    if kind == stat.S_IFREG:\n"
        "        try:\n"
        "            os.ftruncate(fd, 123_457)\n"
        "        except OSError:\n"
        "            pass\n"
        "print(sorted(v[:3] for v in held.values()))"
    ]
    texts, _ = run(plant, staged(tmp_path, "first.txt", "A"))
    first = {tuple(v) for v in ast.literal_eval(texts[0])}
    texts, km = run(
        [DESCRIPTORS + "print(sorted(held.values()))"], staged(tmp_path, "second.txt", "B")
    )
    assert km.without_template is None  # the first could not keep it from starting
    second = ast.literal_eval(texts[0])
    assert second and {tuple(v[:3]) for v in second} & first == set()
    assert [v for v in second if v[3] == 123_457] == []


def test_no_kernel_can_read_or_write_its_templates_memory(tmp_path):
    probe = (
        "import os\n"
        "for what in ('mem', 'environ', 'maps'):\n"
        "    try:\n"
        "        open(f'/proc/{os.getppid()}/{what}', 'rb').read(1); print(what, 'read')\n"
        "    except OSError as e: print(what, type(e).__name__)"
    )
    texts, _ = run([probe], staged(tmp_path, "f.txt", "A"))
    assert texts == ["mem PermissionError\nenviron PermissionError\nmaps PermissionError\n"]


def test_a_template_that_a_kernel_stopped_is_replaced_for_the_next(tmp_path):
    stop = "import os, signal; os.kill(os.getppid(), signal.SIGSTOP); print('stopped it')"
    texts, _ = run([stop], staged(tmp_path, "f.txt", "A"))
    assert texts == ["stopped it\n"]
    (kept,) = student_kernels._TEMPLATES.values()
    texts, km = run(["print('next')"], staged(tmp_path, "g.txt", "B"))
    assert texts == ["next\n"] and km.without_template is None
    assert kept.starts == 2


def _then_to_the_template(tmp_path, act):
    """A first kernel; then, right after the host's kill of its tree, ``act(process, km)`` on
    each of its template's processes (what a process the kernel left behind could do, same
    uid), and a second kernel: its texts, its manager, the kept template and the second
    kernel's seconds."""
    import contextlib
    import time

    import psutil

    texts, _ = run(["print('first')"], staged(tmp_path, "f.txt", "A"))
    assert texts == ["first\n"]
    (kept,) = student_kernels._TEMPLATES.values()
    km = kept.km
    end_kernels = km.end_forked_kernels

    def end_kernels_then_act():
        end_kernels()
        for process in km._own_processes.values():
            with contextlib.suppress(psutil.NoSuchProcess):
                if "kernel_entry" in " ".join(process.cmdline()):
                    act(process, km)

    km.end_forked_kernels = end_kernels_then_act
    started = time.monotonic()
    texts, next_km = run(["print('next')"], staged(tmp_path, "g.txt", "B"))
    return texts, next_km, kept, time.monotonic() - started


def test_a_template_ended_between_two_kernels_is_replaced_and_the_next_kernel_is_forked(tmp_path):
    """Outside attack 64: a process the kernel before left behind outlived the kill of that
    kernel's tree and killed its template just after that kill, before the next fork: the
    next student's kernel started without a template, and their report said so. A template
    that ended between two kernels is replaced as one that could not clean up."""
    import time

    def kill_and_wait(process, km):
        process.kill()
        deadline = time.monotonic() + 10
        while km.provisioner.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)

    texts, next_km, kept, _ = _then_to_the_template(tmp_path, kill_and_wait)
    assert texts == ["next\n"]
    assert next_km.without_template is None  # forked, and nothing for the report to say
    assert kept.starts == 2


def test_a_template_stopped_between_two_kernels_is_replaced_at_once_and_silently(tmp_path):
    """Outside attack 69: what an earlier kernel left behind stopped its template (SIGSTOP)
    after the host's health check: the next kernel's start waited 60 s for sockets that never
    came, then started without a template, and the next student's report said so."""
    import signal

    texts, next_km, kept, seconds = _then_to_the_template(
        tmp_path, lambda process, km: process.send_signal(signal.SIGSTOP)
    )
    assert texts == ["next\n"]
    assert next_km.without_template is None
    assert kept.starts == 2
    assert seconds < 30  # not the 60 s wait for sockets


def test_no_kernel_sets_its_templates_limits_and_the_next_starts_with_the_sandboxs(tmp_path):
    """Outside attack 59: a kernel lowered its template's soft CPU limit (same uid), so that
    every later kernel forked from it was killed after 1 CPU s, and passed a note to the
    next kernel in another limit. No kernel can now set another process's limits; the next
    kernel has the sandbox's, from the same template."""
    limits = "import resource; print(resource.getrlimit(resource.RLIMIT_MSGQUEUE), resource.getrlimit(resource.RLIMIT_CPU))"
    poison = (
        "import os, resource\n"
        "for kind, value in ((resource.RLIMIT_MSGQUEUE, 424243), (resource.RLIMIT_CPU, 121)):\n"
        "    try:\n"
        "        resource.prlimit(os.getppid(), kind, (value, resource.getrlimit(kind)[1]))\n"
        "        print('set')\n"
        "    except PermissionError:\n"
        "        print('refused')"
    )
    # What else a child inherits and a process of the same uid may set: Linux refuses these
    # to a process that lacks a capability its target holds (commoncap's cap_safe_nice:
    # the template holds two, a kernel none). The template checks them before each fork too.
    scheduling = (
        "import os\n"
        "pp = os.getppid()\n"
        "for name, call in (('nice', lambda: os.setpriority(os.PRIO_PROCESS, pp, 5)),\n"
        "                   ('cpus', lambda: os.sched_setaffinity(pp, {0})),\n"
        "                   ('policy', lambda: os.sched_setscheduler(pp, os.SCHED_BATCH, os.sched_param(0)))):\n"
        "    try:\n"
        "        call(); print(name, 'set')\n"
        "    except PermissionError:\n"
        "        print(name, 'refused')"
    )
    texts, _ = run([limits, poison, scheduling], staged(tmp_path, "f.txt", "A"))
    assert texts[1:] == ["refused\nrefused\n", "nice refused\ncpus refused\npolicy refused\n"]
    (kept,) = student_kernels._TEMPLATES.values()
    again, km = run([limits], staged(tmp_path, "g.txt", "B"))
    assert again == texts[:1] and "424243" not in again[0]
    assert km.without_template is None and kept.starts == 1


def test_a_template_whose_own_limits_changed_forks_no_kernel():
    """The template's second guard: before each fork it compares its limits and scheduling
    with those it started with, and a change ends it (a new sandbox serves the next)."""
    code = (
        "import resource\n"
        "from autograder.sandbox import kernel_template as t\n"
        "t._OWN_SETTINGS.update(t._settings())\n"
        "print(repr(t._settings_changed()))\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_MSGQUEUE)\n"
        "resource.setrlimit(resource.RLIMIT_MSGQUEUE, (soft - 1, hard))\n"
        "print(repr(t._settings_changed()))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == [
        "''",
        "'its own limits or scheduling were changed (RLIMIT_MSGQUEUE)'",
    ], done.stderr


def test_a_kernel_killed_by_its_cpu_limit_is_told_apart_from_a_crash(tmp_path):
    """A limit of 1 CPU s is less than the template's own imports: the template's start is
    no kernel's (it had been killed by the kernel's limit on a busy machine), and the
    kernel forked from it gets the whole second."""
    texts, km = run(["while True: pass"], staged(tmp_path, "f.txt", "A"), cpu_seconds=1)
    assert km.without_template is None, km.without_template
    assert (
        km.provisioner is None
        or km.provisioner.process is None
        or km.provisioner.process.poll() is not None
    )
    status = km._kept.exit_status(km._forked_child) if hasattr(km, "_forked_child") else None
    assert status in (-24, -9), status  # SIGXCPU, then the hard limit's SIGKILL


def test_a_forked_kernels_busy_processes_meet_its_templates_cap_and_no_second_limit(tmp_path):
    """Under a control group the template's group caps it and its kernels at
    Sandbox.max_cpus cores. The forked kernel's watchdog once measured the same share
    against the same limit, and the cap's own jitter (1.52 for 1.5 on a loaded machine)
    killed busy kernels or not, by what else the machine ran: the CI trick
    busy_sessions got 0 or 26."""
    from autograder.sandbox import cgroups

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    busy = """
import subprocess, time
busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(4)]
time.sleep(6)
for p in busy:
    p.kill()
print("lived")
"""
    texts, km = run([busy], staged(tmp_path, "f.txt", "A"), max_cpus=0.5)
    assert km.without_template is None, km.without_template
    assert km._watchdog.max_cpus == 0  # the machine's cap is the one limit
    assert texts == ["lived\n"] and km.events == []
    group = km._kept.km._group
    stat = (group.cpu / "cpu.stat").read_text()
    assert int(stat.split("nr_throttled")[1].split()[0]) > 0  # and it did hold them


def test_a_forked_kernels_processes_outside_its_own_tree_count_in_its_limit(tmp_path):
    """Under a control group the forked kernel's watchdog counts the kernel's tasks in the
    group (``KernelShare``), never by walking /proc from the kernel down: a process it
    left behind (started with ``&`` by a shell that exits, adopted by the sandbox's init) is out
    of its tree but in its group, and counts towards Sandbox.max_processes."""
    from autograder.fates import Kind
    from autograder.sandbox import cgroups

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    # One process out of the kernel's tree starts threads until none more may start, and
    # holds them: the kernel's processes and threads are then at the limit, as a fork
    # bomb's copies are.
    orphans = """
import subprocess, sys, time
HOLD = '''
import threading, time
for _ in range(200):
    try:
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    except RuntimeError:
        break
time.sleep(30)
'''
subprocess.run(["/bin/sh", "-c", '"$1" -c "$0" &', HOLD, sys.executable], check=True)
time.sleep(4)
print("lived")
"""
    texts, km = run([orphans], staged(tmp_path, "f.txt", "A"), max_processes=40)
    assert km.without_template is None, km.without_template
    assert isinstance(km._watchdog.group, student_kernels.KernelShare)
    assert [e.kind for e in km.events] == [Kind.PROCESSES], (texts, km.events)


def test_a_forked_kernels_zombies_count_in_its_limit(tmp_path):
    """Children that exit at once and are never reaped leave the control group's task list
    but keep their place under RLIMIT_NPROC: a fork bomb of zombies sat at the limit, its
    fate "graded" (attack 44). The watchdog's walk of the kernel's tree, one look in five,
    counts them."""
    from autograder.fates import Kind
    from autograder.sandbox import cgroups

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    zombies = """
import os, time
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os._exit(0)
time.sleep(4)
print("lived")
"""
    texts, km = run([zombies], staged(tmp_path, "f.txt", "A"), max_processes=40)
    assert km.without_template is None, km.without_template
    assert [e.kind for e in km.events] == [Kind.PROCESSES], (texts, km.events)
    assert "lived" not in texts[0], texts  # stopped while it ran, not only at the last look


def test_templates_turned_off_start_the_kernel_as_any_kernel_and_say_why(tmp_path):
    texts, km = run(
        ["import sys; print('torch' in sys.modules)"],
        staged(tmp_path, "f.txt", "A"),
        kernel_templates=False,
    )
    assert texts == ["False\n"]
    assert "turned off" in km.without_template


def test_each_kernel_gets_socket_names_no_kernel_before_it_had(tmp_path):
    seen = []
    for n in range(3):
        texts, km = run(["print(1)"], staged(tmp_path, "f.txt", str(n)))
        assert texts == ["1\n"]
        seen.append((km.shell_port, km.iopub_port, km.stdin_port, km.control_port, km.hb_port))
    ports = [p for five in seen for p in five]
    assert len(set(ports)) == len(ports)


def test_what_a_kernel_nests_hides_or_tags_in_tmp_never_reaches_the_next(tmp_path):
    """A fifteenth outside attack: 3,000 nested folders crashed the template's cleanup
    (RecursionError), so the next student's kernel started without a template; a folder
    an import of the template had made (torch._dynamo's /tmp/torchinductor_<user>), with
    its read bit taken off, kept a file for the next kernel; user xattrs on /tmp stayed
    charged to the next kernel's memory. Each is cleaned, and the next kernel is forked."""
    plant = (
        "import os, glob\n"
        "here = os.getcwd()\n"
        "os.chdir('/tmp')\n"
        "for _ in range(3000):\n"
        "    os.mkdir('d')\n"
        "    os.chdir('d')\n"
        "os.chdir(here)\n"
        "for folder in glob.glob('/tmp/torchinductor_*') or ['/tmp/torchinductor_x']:\n"
        "    os.makedirs(folder, exist_ok=True)\n"
        "    open(folder + '/planted.txt', 'w').write('from ada')\n"
        "    os.chmod(folder, 0o300)\n"
        "tagged = []\n"
        "for path in ['/tmp', '/dev/shm', *glob.glob('/tmp/*'), *glob.glob('/tmp/.*')]:\n"
        "    try:\n"
        "        os.setxattr(path, 'user.note', b'from ada')\n"
        "        tagged.append(path)\n"
        "    except OSError:\n"
        "        pass\n"
        "print(sorted(tagged))"
    )
    look = (
        "import os, glob\n"
        "print(sorted(os.listdir('.')), 'd' in os.listdir('/tmp'), glob.glob('/tmp/torchinductor_*/*'),\n"
        "      [p for p in ['/tmp', '/dev/shm', *glob.glob('/tmp/*'), *glob.glob('/tmp/.*')]\n"
        "       if 'user.note' in os.listxattr(p)])"
    )
    preload = ["torch._dynamo"]
    first, km = run([plant], staged(tmp_path, "a.txt", "A"), preload=preload)
    assert km.without_template is None
    second, km = run([look], staged(tmp_path, "b.txt", "B"), preload=preload)
    assert km.without_template is None, km.without_template
    assert first[0].startswith("['")  # some folder of /tmp took the attribute
    assert second == ["['b.txt'] False [] []\n"], (first, second)


def test_a_forked_kernel_that_did_not_start_never_quotes_its_templates_log(tmp_path, caplog):
    """Every kernel a template forks writes to the template's log: a kernel that wrote
    staff-like words there, then kept the next kernel from starting, had them quoted in
    the next student's report, then (attack 17) in a warning on the instructor's terminal,
    with a newline that made them a line of their own. Only --debug logs them, escaped."""
    import asyncio
    import types

    from autograder.sandbox.manager import SandboxedKernelManager

    log = tmp_path / "kernel.log"
    log.write_text("\n[course-grade] NOTE FROM THE COURSE STAFF: this student's score is 0\n")
    km = SandboxedKernelManager()
    km.use_bwrap = False
    km._log_path = log
    km.__dict__["provisioner"] = types.SimpleNamespace(pid=None, process=None)

    def fails(shared_log):
        with pytest.raises(RuntimeError) as raised:
            asyncio.run(
                km._sockets_of(
                    str(tmp_path / "k"),
                    [1],
                    "the forked kernel",
                    failed=lambda: True,
                    shared_log=shared_log,
                )
            )
        return str(raised.value)

    assert "COURSE STAFF" in fails(shared_log=False)  # a kernel's own log, as before
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="autograder"):
        said = fails(shared_log=True)
    assert "COURSE STAFF" not in said and "is not quoted" in said
    quoted = [r for r in caplog.records if "COURSE STAFF" in r.getMessage()]
    assert quoted and all(r.levelno == logging.DEBUG for r in quoted)
    assert all("\n[course-grade]" not in r.getMessage() for r in quoted)  # escaped: \\n


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the kernel runs as another uid")
def test_a_read_only_folder_bound_under_tmp_is_never_walked_into(tmp_path):
    """A course cloned under /tmp has its .venv bound read-only under the sandbox's /tmp,
    with folders the kernel's uid cannot list: the template's check between kernels walked
    into them, failed, and no kernel could be forked (a clean clone's run in /tmp/cc22).
    A mount point is listed, never entered."""
    bound = Path(tempfile.mkdtemp(prefix="cg-bind-", dir="/tmp"))
    try:
        (bound / "private" / "deeper").mkdir(parents=True)
        (bound / "private").chmod(0o700)  # root's: the kernel's uid cannot list it
        bound.chmod(0o755)
        for name in ("a.txt", "b.txt"):
            texts, km = run(
                ["print('ok')"], staged(tmp_path, name, "A"), extra_ro_binds=[str(bound)]
            )
            assert km.without_template is None, km.without_template
            assert texts == ["ok\n"]
    finally:
        shutil.rmtree(bound, ignore_errors=True)


def test_a_key_in_the_session_keyring_or_a_locked_user_keyring_never_reaches_the_next(tmp_path):
    """A sixteenth outside attack: every kernel a template forks inherits the template's
    session keyring, which was never emptied, and a kernel that took the rights off its
    user keyring made the clear fail as "no keyrings here": a note from one student's
    kernel reached the next one's in both. Both are emptied before each fork."""
    plant = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"s = libc.syscall({ADD_KEY}, b'user', b'session_note', b'from ada', 8, -3)\n"
        f"u = libc.syscall({ADD_KEY}, b'user', b'user_note', b'from ada', 8, -4)\n"
        f"ring = libc.syscall({KEYCTL}, 0, -4, 0)\n"
        f"libc.syscall({KEYCTL}, 5, ring, 0x01010000)  # view only, for everyone\n"
        "print(s > 0, u > 0)"
    )
    look = (
        "import ctypes, time\n"
        "libc = ctypes.CDLL(None)\n"
        f"linked = [libc.syscall({KEYCTL}, 10, ring, b'user', name, 0) > 0\n"
        "          for ring in (-3, -4, -5) for name in (b'session_note', b'user_note')]\n"
        "time.sleep(1)  # a key no keyring holds any more is destroyed soon after\n"
        "notes = [line for line in open('/proc/keys') if '_note' in line]\n"
        "print(any(linked), notes)"
    )
    first, km = run([plant], staged(tmp_path, "a.txt", "A"))
    if first == ["False False\n"]:
        pytest.skip("this machine refuses keyrings to the kernel: nothing to carry a note")
    assert first == ["True True\n"], first
    second, km = run([look], staged(tmp_path, "b.txt", "B"))
    assert km.without_template is None, km.without_template
    assert second == ["False []\n"], second


def test_a_kernel_pins_no_memory_its_group_does_not_count_and_has_no_loopback(tmp_path):
    """A kernel's messages go through Unix sockets, whose buffers its control group
    counts. Netlink buffers and perf ring buffers cgroup v1 never counts: outside attacks
    held 6.3 GiB in netlink messages between a kernel's own sockets (attack 26) and 6.0-6.5
    GB in perf ring buffers (attack 27), beside a 4 GiB limit, graded 30/30; unread loopback
    TCP buffers held 1.8 GB (attack 25), and a TCP connection left its ports in TIME_WAIT
    for the next kernel to read. Now no socket of another family, and none of the calls
    that pin such memory, can be made; the loopback is down as well; and the next kernel,
    from the same template, sees no socket left."""
    look = (
        "print([r for r in open('/proc/net/tcp').read().splitlines()[1:] if r.split()[9] == '0'])"
    )
    first, km = run([TRY_UNCOUNTED], staged(tmp_path, "a.txt", "A"))
    assert km.without_template is None, km.without_template
    tried = ast.literal_eval(first[0])
    assert tried == {**REFUSED, "loopback up": 0}, tried
    (kept,) = student_kernels._TEMPLATES.values()
    starts = kept.starts
    second, km = run([look], staged(tmp_path, "b.txt", "B"))
    assert km.without_template is None, km.without_template
    assert second == ["[]\n"], second
    assert kept.starts == starts  # the same template: nothing was left in its network


def test_every_kernel_gets_the_same_pid(tmp_path):
    """Kernels of a template share its pid namespace one after another. A kernel could
    move the pid counter (by starting processes) to leave the next one a number in its
    pid, about 20 bits (a seventeenth outside attack's p03). Before each fork a keeper
    that may do nothing else sets the counter: every kernel gets the same pid."""
    burn = (
        "import os\n"
        "for _ in range(100):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "print(os.getpid())"
    )
    first, km = run([burn], staged(tmp_path, "a.txt", "A"))
    assert km.without_template is None, km.without_template
    (kept,) = student_kernels._TEMPLATES.values()
    starts = kept.starts
    second, km = run(["import os; print(os.getpid())"], staged(tmp_path, "b.txt", "B"))
    assert km.without_template is None, km.without_template
    assert second == first and kept.starts == starts  # the same pid, from the same template
    from autograder.sandbox.kernel_entry import KERNEL_PID_BEFORE

    assert first == [f"{KERNEL_PID_BEFORE + 1}\n"]


def test_no_counter_an_earlier_kernel_moved_is_seen_by_the_next(tmp_path):
    """The kernels of a template shared its IPC, network and mount namespaces one after
    another. Emptying them is not enough: their counters stay, and an eighteenth outside
    attack wrote a note in each, read by the next kernel: the next System V IPC id, the
    next inode number of /tmp and /dev/shm, the network's statistics. Each kernel gets
    namespaces of its own, with a new /tmp and /dev/shm: every kernel sees what the first
    saw, whatever the one before it did."""
    look = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None)\n"
        "shm = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600\n"
        "libc.shmctl(shm, 0, None)  # IPC_RMID\n"
        "inodes = []\n"
        "for folder in ('/tmp', '/dev/shm'):\n"
        "    with open(folder + '/probe', 'w') as f:\n"
        "        inodes.append(os.fstat(f.fileno()).st_ino)\n"
        "    os.remove(folder + '/probe')\n"
        "udp = [l for l in open('/proc/net/snmp') if l.startswith('Udp:')][1].split()[4]\n"
        "print(shm, inodes, udp)"
    )
    move = (
        "import ctypes, os, socket\n"
        "libc = ctypes.CDLL(None)\n"
        "for _ in range(50):\n"
        "    libc.shmctl(libc.shmget(0, 4096, 0o1600), 0, None)\n"
        "for folder in ('/tmp', '/dev/shm'):\n"
        "    for i in range(50):\n"
        "        open(f'{folder}/n{i}', 'w').close(); os.remove(f'{folder}/n{i}')\n"
        "for _ in range(42):\n"
        "    try:  # no UDP socket (the socket filter); before it, failures' counters moved\n"
        "        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'n', ('127.0.0.1', 9))\n"
        "    except OSError:\n"
        "        pass\n"
        "print('moved')"
    )
    first, km = run([look], staged(tmp_path, "a.txt", "A"))
    assert km.without_template is None, km.without_template
    moved, _ = run([move, look], staged(tmp_path, "b.txt", "B"))
    assert moved[0] == "moved\n" and moved[1] != first[0]  # the counters did move there
    (kept,) = student_kernels._TEMPLATES.values()
    starts = kept.starts
    after, km = run([look], staged(tmp_path, "c.txt", "C"))
    assert km.without_template is None, km.without_template
    assert after == first and kept.starts == starts  # the first's view, from the same template
