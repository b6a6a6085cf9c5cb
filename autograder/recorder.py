"""Records, inside the student's kernel, the answers that the clean room will check.

An IPython extension, armed by ``autograder.audit.install`` and loaded by ipykernel
before the first cell. Before every cell it writes, as plain data (``plaindata``):

- ``{"t": "cell", "src": <hash of the cell's source>, "names": {name: value id}}``: what
  each of the user's names holds at that moment;
- ``{"t": "value", "d": <value id>, "v": <plain data>}``: each distinct value, once;
- ``{"t": "call", "cell": <cell number>, "fn": <function id>, "parent": <function id of
  the recorded call it was made from, or null>, "args": <hash>, "shape": <hash>, ...}``:
  for each call of a function defined in the notebook, its result (or the builtin
  exception it raised) and any argument it changed in place. ``shape`` fingerprints the
  arguments without the numbers inside tensors, so that a call on a freshly (randomly)
  initialised model still finds its twin in the clean room.

Functions defined in the notebook are wrapped (``functools.wraps``) so their calls are
seen. Everything here runs in the student's process and can be bypassed or lied to;
that is fine, because all the clean room takes from it is data, and data passes a test
there only when it is the right answer. What must hold is the other direction: for an
honest notebook this module changes nothing the tests can see, and never raises.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import types

from autograder import plaindata

# Bound when the kernel starts, before student code: a notebook that rebinds
# builtins.isinstance (or type, len...) changes nothing here.
from builtins import (abs, bool, bytes, callable, dict, float, getattr, hasattr, id,  # noqa: E402,A004
                      int, isinstance, len, list, repr, sorted, str, tuple, type)

MAX_LOG_BYTES = 256 * 1024 * 1024
_fd = -1
_active = None


def arm(fd: int) -> None:
    """Record into ``fd`` (the audit log, opened before any student code ran)."""
    global _fd
    _fd = fd


def load_ipython_extension(shell) -> None:
    global _active
    if _fd < 0 or _active is not None:
        return
    _active = Recorder(shell, _fd)
    shell.events.register("pre_run_cell", _active.before_cell)


def stop() -> None:
    """Record nothing more: the clean room runs no student code."""
    global _active
    if _active is not None:
        _active.shell.events.unregister("pre_run_cell", _active.before_cell)
        _active = None


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def function_ref(fid: int, name: str) -> dict:
    return {"$": "ref", "kind": "fn", "id": fid, "name": name}


def object_ref(value):
    """A reference to a module, or to a function or class that lives in one."""
    if isinstance(value, types.ModuleType):
        return {"$": "ref", "kind": "module", "name": value.__name__}
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if (isinstance(module, str) and module != "__main__" and isinstance(qualname, str)
            and callable(value) and "<" not in qualname):
        return {"$": "ref", "kind": "attr", "module": module, "name": qualname}
    return None


def exception_record(exc: BaseException) -> dict:
    # Only a builtin class crosses over: the clean room re-raises that, with the message.
    base = next((c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"),
                "Exception")
    try:
        message = str(exc)[:2000]
    except Exception:  # noqa: BLE001 - a student's __str__ may raise anything
        message = ""
    return {"type": base, "msg": message}


def call_key(args, kwargs, refs) -> tuple[str, str, list, dict]:
    """Fingerprints of a call's arguments (exact, and shape only), and the arguments."""
    pos = [plaindata.encode(a, refs) for a in args]
    kw = {k: plaindata.encode(v, refs) for k, v in kwargs.items()}
    both = [pos, sorted(kw.items())]
    return plaindata.digest(both), plaindata.digest(plaindata.shape_only(both)), pos, kw


class Recorder:
    def __init__(self, shell, fd: int):
        self.shell, self.fd = shell, fd
        self.fids: dict[int, int] = {}  # id(function) -> function id
        self.keep: list = []  # functions seen, kept alive so their ids are never reused
        self.stored: set[str] = set()
        self.cache: dict[str, tuple] = {}  # name -> (value, version, entry)
        self.stack: list[int] = []  # function ids of the recorded calls in progress
        self.cell = -1  # number of the cell running now (its "cell" line's position)
        self.written = 0
        self.full = False

    # -- before each cell ------------------------------------------------------------
    def before_cell(self, info) -> None:
        try:
            self._snapshot(getattr(info, "raw_cell", "") or "")
        except Exception:  # noqa: BLE001 - recording must never break the notebook
            pass

    def _snapshot(self, raw_cell: str) -> None:
        if self.cell < 0:
            from autograder import audit

            audit.arm_strict()
        self.cell += 1
        ns = self.shell.user_ns
        hidden = getattr(self.shell, "user_ns_hidden", {})
        names = {}
        for name, value in list(ns.items()):
            if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
                continue
            if name in hidden and hidden[name] is value:
                continue
            if self._is_notebook_function(value):
                value = ns[name] = self._wrap(value)
            names[name] = self._name_entry(name, value)
        self._emit({"t": "cell", "n": self.cell, "src": source_hash(raw_cell), "names": names})

    def _name_entry(self, name: str, value):
        version = getattr(value, "_version", None) if _is_tensor(value) else None
        cached = self.cache.get(name)
        if cached and cached[0] is value and version is not None and cached[1] == version:
            return cached[2]
        entry = self._store(value)
        self.cache[name] = (value, version, entry)
        return entry

    def _store(self, value):
        """The value's id in the log (written once), or {"why": ...} if it has none."""
        try:
            data = plaindata.encode(value, self._refs)
        except Exception as exc:  # noqa: BLE001 - Unencodable, or a lying object's error
            return {"why": str(exc)[:300] or type(exc).__name__}
        value_id = plaindata.digest(data)
        if value_id not in self.stored:
            self.stored.add(value_id)
            self._emit({"t": "value", "d": value_id, "v": data})
        return value_id

    # -- functions ---------------------------------------------------------------------
    @staticmethod
    def _is_notebook_function(value) -> bool:
        return (type(value) is types.FunctionType and value.__module__ == "__main__"
                and not hasattr(value, "__course_grade_fid__"))

    def _fid(self, fn) -> int:
        fid = self.fids.get(id(fn))
        if fid is None:
            fid = self.fids[id(fn)] = len(self.keep) + 1
            self.keep.append(fn)
        return fid

    def _refs(self, value):
        fid = getattr(value, "__course_grade_fid__", None) if callable(value) else None
        if isinstance(fid, int):
            return function_ref(fid, value.__qualname__)
        if type(value) is types.FunctionType and value.__module__ == "__main__":
            return function_ref(self._fid(value), value.__qualname__)
        return object_ref(value)

    def _wrap(self, fn):
        fid = self._fid(fn)
        recorder = self

        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            if fid in recorder.stack:  # recursion: the outer call is the one to replay
                return fn(*args, **kwargs)
            parent = recorder.stack[-1] if recorder.stack else None
            recorder.stack.append(fid)
            try:
                return recorder._call(fid, parent, fn, args, kwargs)
            finally:
                recorder.stack.pop()

        recorded.__course_grade_fid__ = fid
        self.fids[id(recorded)] = fid
        self.keep.append(recorded)
        return recorded

    def _call(self, fid, parent, fn, args, kwargs):
        try:
            key, shape, before_pos, before_kw = call_key(args, kwargs, self._refs)
        except Exception:  # noqa: BLE001 - arguments without a plain form: not replayable
            return fn(*args, **kwargs)
        entry = {"t": "call", "cell": self.cell, "fn": fid, "parent": parent, "args": key,
                 "shape": shape}
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            entry["exc"] = exception_record(exc)
            self._record_call(entry, args, kwargs, before_pos, before_kw)
            raise
        entry["result"] = self._store(result)
        self._record_call(entry, args, kwargs, before_pos, before_kw)
        return result

    def _record_call(self, entry, args, kwargs, before_pos, before_kw) -> None:
        try:
            changed = {}
            for i, (arg, before) in enumerate(zip(args, before_pos)):
                self._note_change(changed, str(i), arg, before)
            for name, arg in kwargs.items():
                self._note_change(changed, name, arg, before_kw[name])
            if changed:
                entry["changed"] = changed
            self._emit(entry)
        except Exception:  # noqa: BLE001
            pass

    def _note_change(self, changed, slot, arg, before) -> None:
        after = plaindata.encode(arg, self._refs)
        if plaindata.digest(after) != plaindata.digest(before):
            changed[slot] = self._store(arg)

    # -- output ------------------------------------------------------------------------
    def _emit(self, entry: dict) -> None:
        if self.full:
            return
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        if self.written + len(line) > MAX_LOG_BYTES:
            self.full = True
            line = b'{"t":"full"}\n'
        view = memoryview(line)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            self.full = True  # a closed or full log: the clean room finds answers missing
        self.written += len(line)


def _is_tensor(value) -> bool:
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)
