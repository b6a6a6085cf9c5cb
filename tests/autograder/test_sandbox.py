"""The sandbox every grading kernel runs in, tried from inside a real kernel.

Each test starts a kernel the way the pipeline does (``autograder.sandbox.manager``), as the slot
uid a root grader gives it, and asks it what it can reach.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from traitlets.config import Config

from autograder.sandbox.bubblewrap import STAGING_DIR, WORK_DIR, Sandbox, nested_argv
from autograder.sandbox.manager import launch_kernel
from tests.autograder.memory_probe import REFUSED, TRY_UNCOUNTED
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/setup --system installs it)"
)
UID = 61990 if os.geteuid() == 0 else -1


@pytest.fixture
def kernel_with(tmp_path):
    """Start a sandboxed kernel with the given Sandbox settings; yields run(code) -> str."""
    started = []

    def start(uid: int = UID, **limits):
        config = Config()
        for name, value in limits.items():
            setattr(config.Sandbox, name, value)
        config.SandboxMixin.uid = uid
        root = Path(tempfile.mkdtemp(prefix="cg-", dir="/tmp"))
        root.chmod(0o755)
        config.SandboxMixin.runtime_root = str(root)
        staging = tmp_path / "staging"
        staging.mkdir(exist_ok=True)
        staging.chmod(0o755)
        (staging / "data.txt").write_text("staged")
        (staging / "data.txt").chmod(0o644)
        km = launch_kernel(config=config, staging=staging)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        started.append((km, kc, root))

        def run(code: str, timeout: float = 60) -> str:
            out = []

            def keep(msg):
                content = msg["content"]
                if msg["msg_type"] == "stream":
                    out.append(content["text"])
                elif msg["msg_type"] == "error":
                    out.append(f"{content['ename']}: {content['evalue']}")

            kc.execute_interactive(code, timeout=timeout, output_hook=keep)
            return "".join(out).strip()

        def run_until_killed(code: str, within: float = 40) -> None:
            """Send code the kernel is to be killed for, and return once it is gone (a
            killed kernel never replies: waiting for a reply would wait for the timeout)."""
            kc.execute(code)
            deadline = time.monotonic() + within
            while km.is_alive() and time.monotonic() < deadline:
                time.sleep(0.2)
            # The watchdog looks every WATCH_INTERVAL: give it one look to say why.
            deadline = time.monotonic() + 2
            while not km.is_alive() and not km.events and time.monotonic() < deadline:
                time.sleep(0.05)

        run.km, run.staging, run.root, run.until_killed = km, staging, root, run_until_killed
        return run

    yield start
    for km, kc, root in started:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(root, ignore_errors=True)


def test_the_kernel_sees_its_staged_files_and_nothing_of_the_course(kernel_with):
    run = kernel_with()
    seen = json.loads(
        run(f"""
import json, os, socket
def can(action):
    try:
        action()
        return True
    except OSError:
        return False
print(json.dumps({{
    "cwd": os.getcwd(), "staged": open("data.txt").read(), "uid": os.getuid(),
    "source": os.path.exists({str(ROOT / "source")!r}),
    "home": os.path.exists("/root/.ssh") or os.path.exists("/home"),
    "network": can(lambda: socket.create_connection(("1.1.1.1", 80), timeout=2)),
    "staging_writable": can(lambda: open("{STAGING_DIR}/x", "w")),
    "host_writable": [line.split()[4] for line in open("/proc/self/mountinfo")
                      if " - tmpfs " not in line and " - proc " not in line
                      and line.split()[5].startswith("rw") and line.split()[4] != "/dev"
                      and not line.split()[4].startswith("/dev/")],
}}))
""")
    )
    assert seen == {
        "cwd": WORK_DIR,
        "staged": "staged",
        "uid": UID if UID >= 0 else os.getuid(),
        "source": False,
        "home": False,
        "network": False,
        "staging_writable": False,
        "host_writable": [],
    }  # no host folder is mounted writable
    run("open('new.txt', 'w').write('made in the kernel')")
    assert sorted(p.name for p in run.staging.iterdir()) == ["data.txt"]  # host untouched


def test_the_kernel_cannot_make_a_user_namespace(kernel_with):
    run = kernel_with()
    out = run("""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.unshare(0x10000000), ctypes.get_errno())  # CLONE_NEWUSER
""")
    result, errno = out.split()
    assert result == "-1" and int(errno) != 0


def test_writes_stop_at_the_disk_quota(kernel_with):
    run = kernel_with(disk_mb=40)
    out = run("""
written = 0
try:
    with open("big.bin", "wb") as f:
        for _ in range(100):
            f.write(b"x" * 1_000_000)
            f.flush()
            written += 1
except OSError as exc:
    print("stopped", exc.errno, written)
""")
    word, errno, written = out.split()
    assert word == "stopped" and int(errno) == 28 and int(written) < 41  # ENOSPC


@pytest.mark.parametrize("control_group", [True, False], ids=["control group", "watchdog alone"])
def test_memory_kept_in_tmpfs_counts_against_the_limit(kernel_with, control_group, monkeypatch):
    """In a control group the machine's kernel counts tmpfs pages (the watchdog then only
    reports its OOM kill); without one, the watchdog adds the tmpfs folders itself."""
    from autograder.sandbox import cgroups

    if control_group and cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    if not control_group:
        monkeypatch.setattr(cgroups, "unavailable", lambda: "off for this test")
    run = kernel_with(memory_mb=700, shm_mb=400, disk_mb=400)
    run.until_killed("""
held = b"x" * 300_000_000
for folder in ("/dev/shm", "/tmp"):
    with open(folder + "/hoard", "wb") as f:
        for _ in range(190):
            f.write(b"y" * 1_000_000)
import time
time.sleep(10)
""")
    assert not run.km.is_alive()
    assert [e.kind.value for e in run.km.events] == ["memory"]
    assert run.km.events[0].used >= 700  # a control group stops it at the limit itself


@pytest.mark.parametrize("control_group", [True, False], ids=["control group", "watchdog alone"])
def test_a_fork_bomb_is_killed_at_the_process_limit(kernel_with, control_group, monkeypatch):
    """RLIMIT_NPROC stops the forks; the copies left behind would then grow into the memory
    limit or not, depending on the machine. The kernel is killed at its process limit, so a
    fork bomb's fate is the same everywhere."""
    from autograder.sandbox import cgroups

    if control_group and cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    if not control_group:
        monkeypatch.setattr(cgroups, "unavailable", lambda: "off for this test")
    # RLIMIT_NPROC counts every process of a uid: a uid of its own, so that another
    # test's kernel (pytest -n 2 runs this file's tests side by side) takes none of its 48.
    uid = (61993 if control_group else 61994) if UID >= 0 else -1
    run = kernel_with(uid=uid, max_processes=48, memory_mb=4000)
    run.until_killed("import os\nwhile True:\n    os.fork()")
    assert not run.km.is_alive()
    assert [e.kind.value for e in run.km.events] == ["processes"], run.km.events
    assert run.km.events[0].used >= 48


def test_a_kernel_with_a_loopback_pins_no_memory_its_group_does_not_count(kernel_with):
    """A kernel started without a template has its sandbox's loopback up, but can make no
    socket of it: only Unix sockets, whose buffers its control group counts, and none of
    the calls that pin memory no group counts (attack 26 held 6.3 GiB in netlink buffers,
    attack 27 6.0-6.5 GB in perf ring buffers). Under cgroup v1 its group also bounds
    TCP buffers, which v1 counts only then (attack 25 held 1.8 GB there)."""
    from autograder.sandbox import cgroups

    run = kernel_with()
    tried = ast.literal_eval(run(TRY_UNCOUNTED))
    assert tried == {**REFUSED, "loopback up": 1}, tried
    tcp = [f / "memory.kmem.tcp.limit_in_bytes" for f in getattr(run.km._group, "folders", [])]
    if [f for f in tcp if f.exists()]:  # cgroup v1 with kernel memory accounting
        (limit,) = [int(f.read_text()) for f in tcp if f.exists()]
        assert 0 < limit <= cgroups.TCP_BYTES  # the kernel rounds it down to whole pages


def test_an_ended_kernel_or_template_leaves_no_control_group_behind(kernel_with):
    """A template is ended by ``discard``, never by shutdown_kernel: its control group
    went with it only there (a grading server kept two groups per run, 2,485 of them
    here before this test)."""
    from autograder.sandbox import cgroups
    from autograder.sandbox.manager import discard

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    run = kernel_with()
    folders = list(run.km._group.folders)
    assert folders and all(f.exists() for f in folders)
    discard(run.km, None)
    assert not [f for f in folders if f.exists()]


def test_groups_a_killed_grader_left_are_swept_and_a_new_one_is_kept():
    """A grader killed outright (SIGKILL) removes nothing: the next grader removes the
    empty groups made long ago, never one made a moment ago (a kernel about to join it)."""
    from autograder.sandbox import cgroups

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    old, new = cgroups.KernelGroup(1 << 30, 1.0), cgroups.KernelGroup(1 << 30, 1.0)
    try:
        long_ago = time.time() - 2 * cgroups.STALE_SECONDS
        for folder in old.folders:
            os.utime(folder, (long_ago, long_ago))
        assert cgroups.sweep() >= len(old.folders)
        assert not [f for f in old.folders if f.exists()]
        assert all(f.exists() for f in new.folders)
    finally:
        old.remove()
        new.remove()


def test_pages_that_forked_workers_share_are_counted_once(kernel_with, monkeypatch):
    """Without a control group the watchdog sums the tree's memory: what a DataLoader's
    forked workers share with the kernel counts once, not in every worker."""
    from autograder.sandbox import cgroups

    monkeypatch.setattr(cgroups, "unavailable", lambda: "off for this test")
    run = kernel_with(memory_mb=900)
    assert (
        run("""
import os, time
held = bytearray(300_000_000)  # written: resident in the kernel, then shared by 3 forks
workers = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    workers.append(pid)
for pid in workers:
    os.waitpid(pid, 0)
print("workers done")
""")
        == "workers done"
    )
    assert run.km.is_alive() and run.km.events == []


def test_the_kernels_entry_imports_nothing_but_the_standard_library():
    """It runs before the limits and the second bubblewrap, twice per kernel: nothing of
    the course's environment (traitlets...) loads there."""
    import subprocess
    import sys

    # (A None entry in sys.modules blocks a module: it was not loaded.)
    code = (
        "import sys; before = set(sys.modules); import autograder.sandbox.kernel_entry; "
        "print(sorted(m.split('.')[0] for m, module in sys.modules.items() "
        "if m not in before and module is not None))"
    )
    loaded = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True, cwd="/"
    ).stdout
    third_party = {
        m
        for m in eval(loaded)
        if m not in sys.stdlib_module_names and m not in ("autograder", "_distutils_hack")
    }
    assert "autograder" in loaded and not third_party, third_party


def test_the_arguments_say_what_is_writable_and_how_large():
    sandbox = Sandbox(disk_mb=123, shm_mb=45)
    argv = sandbox.argv(Path("/x/staging"), [Path("/tmp/cg-1/k/kernel.json")], userns=True)
    text = " ".join(argv)
    assert f"--size {123_000_000} --perms 1777 --tmpfs /tmp" in text
    assert f"--size {45_000_000} --perms 1777 --tmpfs /dev/shm" in text
    assert f"--ro-bind /x/staging {STAGING_DIR}" in text
    assert "--ro-bind /tmp/cg-1/k/kernel.json /tmp/cg-1/k/kernel.json" in text
    assert "--unshare-user --disable-userns" in text and "--unshare-net" in text
    assert "--disable-userns" not in sandbox.argv(Path("/s"), userns=False)
    assert nested_argv("bwrap")[:3] == ["bwrap", "--unshare-user", "--disable-userns"]
    # No host path is bound writable at all, and nothing of the course is bound.
    assert "--bind" not in argv and "--dev-bind" not in argv
    assert not any(str(ROOT / "source") in a for a in argv)


def test_the_gpu_profile_binds_the_devices_lifts_the_address_limit_and_picks_a_gpu(monkeypatch):
    from autograder.worker import worker

    devices = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    monkeypatch.setattr(worker, "gpu_devices", lambda: devices)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    config = Config()
    worker.gpu_profile(config, slot=3)
    sandbox = Sandbox(config=config)
    assert sandbox.limits()["address_space_mb"] == 0  # CUDA reserves huge virtual ranges
    text = " ".join(sandbox.argv(Path("/s")))
    assert all(f"--dev-bind {d} {d}" in text for d in devices)
    assert list(config.SandboxMixin.extra_env) == ["CUDA_VISIBLE_DEVICES=1"]  # slot 3 of 2 GPUs
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")  # set by the worker's launcher: kept
    worker.gpu_profile(config, slot=3)
    assert list(config.SandboxMixin.extra_env) == ["CUDA_VISIBLE_DEVICES=5"]


def test_an_assignments_templates_preload_only_what_the_config_names_for_it():
    from traitlets import TraitError

    from autograder.worker import worker

    config = Config()
    config.Sandbox.template_preload = {"gpu_training": ["torch._dynamo", "colorsys"]}
    worker.preload_for(config, "gpu_training")
    assert list(config.SandboxMixin.preload) == ["torch._dynamo", "colorsys"]
    worker.preload_for(config, "gpu_tensors")
    assert list(config.SandboxMixin.preload) == []
    for bad in ("os; import shutil", "../x", "torch._dynamo ", ""):
        with pytest.raises(TraitError, match="is not a module name"):
            Sandbox(template_preload={"gpu_training": [bad]})


def test_every_module_the_course_preloads_is_importable_for_one_of_its_units():
    """A misspelled name would make every template of the unit fail to start (its kernels
    then start as any kernel: slower, never wrong)."""
    import importlib.util

    from autograder.config import grading_config

    preload = Sandbox(config=grading_config(ROOT)).template_preload
    assert preload, "the course preloads nothing: units 2-4 pay torch._dynamo twice a submission"
    units = {p.name for p in (ROOT / "source").iterdir() if p.is_dir()}
    assert set(preload) <= units
    assert all(importlib.util.find_spec(name) for names in preload.values() for name in names)


@pytest.mark.gpu
def test_on_a_gpu_the_kernels_see_cuda_and_the_solution_keeps_full_marks(tmp_path):
    """course-grade --gpu: the hidden tests run on CUDA too (their device lists add "cuda"
    where the test kernel has a GPU)."""
    import nbformat

    from autograder.config import grading_config
    from autograder.coordinator import grade, inbox
    from autograder.job import Job
    from autograder.worker import trusted_kernel, worker
    from tests.class_fixture import ASSIGNMENT, NOTEBOOK, build_course
    from tests.submissions_gpu_tensors import RELEASE, SOLUTIONS, TOTAL, make_submission

    course = build_course(tmp_path)
    nb = make_submission(RELEASE, SOLUTIONS)
    nb.cells.append(
        nbformat.v4.new_code_cell("import torch\nprint('cuda', torch.cuda.is_available())")
    )
    folder = course / "submitted" / "ada" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / NOTEBOOK)
    files, _ = inbox.read_submission(folder, grading_config(course))
    try:
        result = worker.grade_job(
            Job("ada", "d", files, grade.course_files(course, ASSIGNMENT), gpu=True)
        )
    finally:
        trusted_kernel.close_all()
    outcome = grade.record(course, ASSIGNMENT, result)
    assert outcome["score"] == TOTAL, outcome["details"]
    assert b"cuda True" in result.autograded[NOTEBOOK]


def test_a_kernel_that_keeps_many_cpus_busy_is_stopped(kernel_with, monkeypatch):
    """Busy processes, each in a session of its own (so many 'users' to the scheduler),
    would starve the other kernels: without a control group to cap it, the tree's CPU
    share is the limit, and the watchdog stops it."""
    from autograder.sandbox import cgroups

    monkeypatch.setattr(cgroups, "unavailable", lambda: "off for this test")
    run = kernel_with(max_cpus=0.5)
    run.until_killed("""
import subprocess, time
busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(3)]
time.sleep(20)
""")
    assert not run.km.is_alive()
    assert [e.kind.value for e in run.km.events] == ["cpu_share"]


def test_a_control_group_caps_the_cpu_of_many_busy_processes(kernel_with):
    """With a control group (root), busy processes in sessions of their own get the cap in
    all, not a share each: the kernel lives on, slowed, and the others are unharmed."""
    from autograder.sandbox import cgroups

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    run = kernel_with(max_cpus=0.5)
    used = run(
        """
import os, subprocess, time
busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(4)]
start, cpu = time.monotonic(), os.times()
time.sleep(4)
t = os.times()
print((t.children_user + t.children_system) / (time.monotonic() - start))
for p in busy:
    p.kill()
""",
        timeout=30,
    )
    assert run.km.is_alive() and run.km.events == []
    group = run.km._group
    stat = (group.cpu / ("cpu.stat" if group.v2 else "cpu.stat")).read_text()
    assert ("nr_throttled" in stat) and int(stat.split("nr_throttled")[1].split()[0]) > 0
    del used


def test_a_timed_out_cells_processes_are_killed_and_the_kernel_kept(kernel_with):
    """What TwoKernelExecute does before it interrupts a cell that ran out of time: every
    process the notebook started goes (sessions of their own, orphans reparented inside the
    sandbox), the kernel and bwrap stay."""
    run = kernel_with()
    assert (
        run("""
import os, subprocess
busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
        for _ in range(3)]
middle = os.fork()
if middle == 0:  # leaves an orphan: its parent exits at once, it is reparented
    if os.fork() == 0:
        while True:
            pass
    os._exit(0)
os.waitpid(middle, 0)
print(len(busy))
""")
        == "3"
    )
    assert run.km.kill_strays() == 4
    assert (
        run("""
import time
end = time.monotonic() + 10
while any(p.poll() is None for p in busy) and time.monotonic() < end:
    time.sleep(0.05)
print(sum(p.poll() is not None for p in busy))
""")
        == "3"
    )
    # The orphan, killed above, may take a moment to end on a loaded machine (CI once
    # counted it again): it must be gone soon, and nothing may take its place.
    deadline = time.monotonic() + 10
    while run.km.kill_strays() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.km.is_alive() and run.km.kill_strays() == 0


def test_one_busy_core_is_within_the_cpu_share(kernel_with):
    run = kernel_with(max_cpus=1.5)
    assert (
        run("""
import time
end = time.monotonic() + 6
n = 0
while time.monotonic() < end:
    n += 1
print("done")
""")
        == "done"
    )
    assert run.km.is_alive() and run.km.events == []


HIDDEN_MEMORY = {
    # Pages of an unmapped memfd: in no process's resident memory, in no tmpfs folder.
    "memfd": """
import os
fds = []
for _ in range(5):
    fd = os.memfd_create("hoard")
    for _ in range(100):
        os.write(fd, b"m" * 1_000_000)
    fds.append(fd)
""",
    # A System V shared-memory segment, filled and detached.
    "sysv": """
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for _ in range(3):
    sid = libc.shmget(0, 200_000_000, 0o1600)
    address = libc.shmat(sid, None, 0)
    assert sid >= 0 and address not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    ctypes.memset(address, 7, 200_000_000)
    libc.shmdt(ctypes.c_void_p(address))
""",
}


@pytest.mark.parametrize("how", sorted(HIDDEN_MEMORY))
def test_memory_hidden_from_every_process_still_counts(kernel_with, how):
    """Where the grader can give each kernel a control group (root), memory held where
    no process shows it is counted like any other: the kernel is killed for memory."""
    from autograder.sandbox import cgroups

    if cgroups.unavailable():
        pytest.skip(f"no control group here: {cgroups.unavailable()}")
    # No address-space limit: it would refuse the segments before they are filled.
    run = kernel_with(memory_mb=350, address_space_limit=False)
    run.until_killed(HIDDEN_MEMORY[how] + "\nimport time\ntime.sleep(10)\nprint('kept it all')")
    assert not run.km.is_alive() and run.km.oom_killed(), run.km.events


def test_a_kernel_process_dies_with_the_grader_that_started_it(tmp_path):
    """die_with_grader, the kernels' preexec_fn: SIGKILL the grader and what it started goes."""
    import signal
    import subprocess
    import sys

    pidfile = tmp_path / "child"
    grader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"""
import subprocess, time
from autograder.sandbox.manager import die_with_grader
child = subprocess.Popen(["sleep", "120"], preexec_fn=die_with_grader())
open({str(pidfile)!r}, "w").write(str(child.pid))
time.sleep(120)
""",
        ],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    child = int(pidfile.read_text())
    assert psutil.pid_exists(child)
    grader.send_signal(signal.SIGKILL)
    grader.wait()
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child outlived the grader"
        time.sleep(0.05)


def test_a_kernel_flooding_its_output_cannot_fill_the_graders_memory(kernel_with):
    """Issue 17: one student pushed 2.8 GB into a grading process as many messages, each
    under the size cap, that nothing read yet. The grader's sockets hold at most
    RECEIVE_QUEUE unread messages: the rest wait (or are dropped) on the kernel's side,
    in the kernel's own memory."""
    from autograder.sandbox.manager import RECEIVE_QUEUE

    run = kernel_with(max_message_mb=8, memory_mb=3000)
    kc = run.km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        me = psutil.Process()
        before = me.memory_info().rss
        kc.execute(
            "from IPython.display import publish_display_data\n"
            "blob = 'x' * 6_000_000\n"
            "for i in range(60):\n"
            "    publish_display_data({'text/plain': blob})\n"
        )
        kc.get_shell_msg(timeout=120)  # the kernel has sent all 60 (360 MB); none read yet
        time.sleep(2)
        grown_mb = (me.memory_info().rss - before) / 1e6
        assert grown_mb < (RECEIVE_QUEUE + 2) * 8 + 20, grown_mb
    finally:
        kc.stop_channels()
