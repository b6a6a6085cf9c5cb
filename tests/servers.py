"""Real servers for the tests: a PostgreSQL server and a Dask cluster on this machine.

``postgres(tmp)`` runs Debian's PostgreSQL (installed by ``scripts/setup --system``) in a
temporary folder, on a unix socket only, as an unprivileged user (the server refuses to
run as root), and gives a gradebook URL. ``dask_cluster(n)`` starts ``dask scheduler``
and n ``dask worker`` processes on loopback, as the README tells instructors to. Both
are context managers that stop what they started.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def postgres_bin() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def _server_user() -> list[str]:
    """How to run the server's commands: as 'postgres' (or nobody) when we are root."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return ["runuser", "-u", name, "--"]
    raise RuntimeError("no unprivileged user to run PostgreSQL as")


@contextlib.contextmanager
def postgres(tmp: Path, database: str = "gradebook"):
    """A PostgreSQL server of its own; yields the SQLAlchemy URL of an empty database."""
    bin_dir = postgres_bin()
    # Its own folder, outside pytest's (which only root may enter).
    folder = Path(tempfile.mkdtemp(prefix="cg-postgres-", dir="/tmp"))
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir(parents=True)
    runas = _server_user()
    if runas:
        user = runas[2]
        info = pwd.getpwnam(user)
        for path in (folder, sockets):
            os.chown(path, info.pw_uid, info.pw_gid)

    def run(*cmd):
        return subprocess.run(
            runas + [str(c) for c in cmd], check=True, capture_output=True, text=True, timeout=120
        )

    run(bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "grader", "--no-sync")
    run(
        bin_dir / "pg_ctl",
        "-D",
        data,
        "-l",
        folder / "server.log",
        "-w",
        "-o",
        f"-k {sockets} -c listen_addresses='' -c fsync=off -p 5432",
        "start",
    )
    try:
        run(bin_dir / "createdb", "-h", sockets, "-p", "5432", "-U", "grader", database)
        yield f"postgresql://grader@/{database}?host={sockets}&port=5432"
    finally:
        subprocess.run(
            runas + [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def dask_cluster(workers: int, tmp: Path, nthreads: int = 1):
    """``dask scheduler`` and ``workers`` x ``dask worker --nthreads N`` (no nanny: a
    killed worker stays dead). Yields (scheduler address, {name: worker Popen}, scheduler
    Popen)."""
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DASK_DISTRIBUTED__WORKER__DAEMON": "False",
    }
    log = open(tmp / "scheduler.log", "w+")
    scheduler = subprocess.Popen(
        [str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"],
        stdout=log,
        stderr=log,
        env=env,
        cwd=tmp,
        start_new_session=True,
    )
    procs = {}
    try:
        address = _wait_for(log, r"Scheduler at:\s+(tcp://[0-9.:]+)")
        for n in range(workers):
            wlog = open(tmp / f"worker-{n}.log", "w+")
            # A worker shares no folder with the course: its own working folder.
            cwd = tmp / f"worker-{n}"
            cwd.mkdir()
            procs[f"worker-{n}"] = subprocess.Popen(
                [
                    str(BIN / "dask"),
                    "worker",
                    address,
                    "--nthreads",
                    str(nthreads),
                    "--no-nanny",
                    "--name",
                    f"worker-{n}",
                    "--no-dashboard",
                ],
                stdout=wlog,
                stderr=wlog,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        _wait_workers(address, workers)
        yield address, procs, scheduler
    finally:
        for proc in [*procs.values(), scheduler]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _wait_for(log, pattern: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        match = re.search(pattern, log.read())
        if match:
            return match.group(1)
        time.sleep(0.2)
    log.seek(0)
    raise RuntimeError(f"dask did not start: {log.read()[-2000:]}")


def _wait_workers(address: str, count: int, timeout: float = 60) -> None:
    from distributed import Client

    with Client(address, timeout="20s") as client:
        client.wait_for_workers(count, timeout=timeout)


def has_postgres() -> bool:
    return postgres_bin() is not None and shutil.which("runuser") is not None
