"""Audit hooks installed in every student kernel before any student code runs.

``install(log_path)`` is called by ``autograder.kernel_entry`` inside the sandbox. It
adds a ``sys.addaudithook`` hook, which no Python code can remove, that

- denies and logs what a graded notebook never needs: reading or writing files outside
  the work folder and the read-only runtime (Python, the venv, the course's public
  packages, /usr, /etc, /proc...), any network use, trace and profile functions (they
  can jump over a test's ``assert`` lines), walking the garbage collector's object
  lists (the way to reach this hook's own state), and touching the log itself;
- logs, without denying, starting other programs (the sandbox limits them).

Each entry is one JSON line, ``{"t": "audit", ...}``, written to a file descriptor opened
before the hook exists, with ``O_APPEND`` so that an entry, once written, stays. The
same descriptor carries the answer recorder's lines (``autograder.recorder``), which
this function arms; the log file is the only file the sandbox lets the kernel write
outside its work folder. The bubblewrap sandbox is what really keeps files and network
out of reach; this hook names the attempt, so the report can flag it, and is the only
guard when grading runs with ``--no-sandbox``.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading

EXTENSION_ARG = "--IPKernelApp.extra_extensions=autograder.recorder"

DENIED_EVENTS = {
    "sys.settrace": "installs a trace function (sys.settrace)",
    "sys.setprofile": "installs a profile function (sys.setprofile)",
    "gc.get_objects": "walks the interpreter's objects (gc.get_objects)",
    "gc.get_referrers": "walks the interpreter's objects (gc.get_referrers)",
    "gc.get_referents": "walks the interpreter's objects (gc.get_referents)",
    "sys._current_frames": "reads other threads' frames (sys._current_frames)",
    "socket.getaddrinfo": "looks up a network address",
    "socket.gethostbyname": "looks up a network address",
    "socket.gethostbyaddr": "looks up a network address",
    "urllib.Request": "opens a URL",
    "ftplib.connect": "opens an FTP connection",
    "smtplib.connect": "opens an SMTP connection",
    "http.client.connect": "opens an HTTP connection",
}
PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                  "os.spawn", "os.fork", "os.forkpty", "pty.spawn")
# Events that name paths: which arguments are read from, and which written to.
PATH_EVENTS = {
    **{e: ((), (0,)) for e in ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                               "os.truncate", "os.utime", "shutil.rmtree", "shutil.chown")},
    "os.rename": ((), (0, 1)), "shutil.move": ((), (0, 1)),
    "os.link": ((0,), (1,)), "os.symlink": ((), (1,)),
    **{e: ((0,), (1,)) for e in ("shutil.copyfile", "shutil.copymode", "shutil.copystat",
                                 "shutil.copytree")},
}
READ_EVENTS = ("os.listdir", "os.scandir", "glob.glob", "os.chdir")
NET_EVENTS = ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Denied(PermissionError):
    """An action the grader does not allow; the student's cell sees this error."""


def install(log_path: str) -> None:
    fd = _open_log(log_path)
    read_roots, write_roots = _roots()
    hook = _make_hook(fd, os.path.realpath(log_path) if log_path else "",
                      tuple(read_roots), tuple(write_roots))
    _write_line(fd, {"t": "audit", "event": "install", "pid": os.getpid(),
                     "work_dir": os.getcwd()})
    sys.addaudithook(hook)
    global arm_strict
    arm_strict = hook.__defaults__[-1].set  # noqa: PLW0603 - a one-way latch, see below
    if fd >= 0:
        from autograder import recorder

        recorder.arm(fd)
        sys.argv.append(EXTENSION_ARG)


def arm_strict() -> None:
    """Start denying the interpreter-level events (trace functions, gc walks).

    ipykernel's own start-up calls ``sys.settrace`` (debugpy's import does), so these
    are denied only from the first cell on: the recorder calls this before the first
    cell runs. It is a one-way latch, so a student who calls it changes nothing.
    """


def _open_log(log_path: str) -> int:
    if not log_path:
        return -1
    return os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _write_line(fd: int, entry: dict) -> None:
    if fd >= 0:
        os.write(fd, (json.dumps(entry, default=str) + "\n").encode())


def _roots() -> tuple[list[str], list[str]]:
    """Folders the kernel may read, and the (fewer) it may write."""
    work = os.path.realpath(os.getcwd())
    tmp = os.path.realpath(tempfile.gettempdir())
    write = [work, tmp, "/dev/shm", "/dev/null"]
    read = write + ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc",
                    "/sys", "/dev", "/opt/conda", "/var/lib", "/var/cache/fontconfig"]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        read.append(os.path.realpath(prefix))
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            read.append(os.path.realpath(entry))
    read.extend(_package_dirs(("gpucourse", "autograder")))
    return sorted(set(read)), sorted(set(write))


def _package_dirs(names) -> list[str]:
    # Editable installs map these packages to the course's checkout; only their own
    # folders are public, never the checkout around them (source/, the gradebook).
    import importlib.util

    dirs = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(os.path.realpath(location))
    return dirs


def _make_hook(fd, log_path, read_roots, write_roots):
    # Everything the hook uses is bound here, so that a student who replaces os.write,
    # json.dumps or os.path.realpath in their module changes nothing in the hook.
    def hook(event, args, _fd=fd, _log=log_path, _reads=read_roots, _writes=write_roots,
             _busy=threading.local(), _seq=[0], _write=os.write, _dumps=json.dumps,
             _realpath=os.path.realpath, _fspath=os.fspath, _sep=os.sep,
             _inet=(socket.AF_INET, socket.AF_INET6), _Denied=Denied,
             _denied=DENIED_EVENTS, _procs=PROCESS_EVENTS, _pev=PATH_EVENTS,
             _rev=READ_EVENTS, _net=NET_EVENTS, _wflags=WRITE_FLAGS,
             _strict=threading.Event()):
        if getattr(_busy, "on", False):
            return  # the hook's own calls raise events too (per thread: no gap to race)
        why = None
        paths = ()  # (path, writing) pairs
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, (str, bytes)):
                paths = ((path, (isinstance(mode, str) and any(c in mode for c in "wax+"))
                          or (isinstance(flags, int) and bool(flags & _wflags))),)
        elif event == "sqlite3.connect":
            if args and isinstance(args[0], (str, bytes)) and args[0] not in (":memory:", ""):
                paths = ((args[0], True),)
        elif event in _pev:
            reads, writes = _pev[event]
            paths = tuple((args[i], i in writes) for i in reads + writes
                          if i < len(args) and isinstance(args[i], (str, bytes)))
            if event == "os.truncate" and args and args[0] == _fd:
                why = "truncates the audit log"
        elif event in _rev:
            paths = tuple((a, False) for a in args[:1] if isinstance(a, (str, bytes)))
        elif event in _net:
            sock = args[0] if args else None
            if getattr(sock, "family", None) in _inet:
                why = f"tries the network ({event} {args[1] if len(args) > 1 else ''})"
        elif event in _denied:
            if not _strict.is_set():
                return
            why = _denied[event]
        elif not event.startswith(_procs):
            return
        _busy.on = True
        try:
            for p, writing in paths:
                real = _realpath(_fspath(p))
                if isinstance(real, bytes):
                    real = real.decode(errors="replace")
                if _log and real == _log:
                    why = "touches the audit log"
                    break
                roots = _writes if writing else _reads
                if not any(real == r or real.startswith(r.rstrip(_sep) + _sep) for r in roots):
                    why = ("writes " if writing else "reads ") + \
                        f"outside its folder: {real}"
                    break
            if why is None and not event.startswith(_procs):
                return
            _seq[0] += 1
            entry = {"t": "audit", "seq": _seq[0], "event": event, "denied": why is not None,
                     "why": why or f"starts a program ({event})",
                     "args": [str(a)[:300] for a in args[:3]]}
            if _fd >= 0:
                try:
                    _write(_fd, (_dumps(entry) + "\n").encode())
                except OSError:
                    pass  # a closed log: review() flags what is missing
        finally:
            _busy.on = False
        if why is not None:
            raise _Denied(f"course-grade: not allowed while grading: {why}")

    return hook
