"""Runs inside the clean-room kernel: the student's recorded answers stand in for their code.

The clean room never runs a line the student wrote. Before each cell of the trusted
source notebook, ``Replay.bind`` gives the notebook's answer names (the names the
solution cells define) the values the student's kernel held just before it ran the
same cell. Values are decoded from plain data; a student function becomes a stub that
returns the result recorded for the same call, re-raises the builtin exception
recorded, and repeats any change it made to its arguments. The same call is the next
one, in this cell, that the tests (not another student function) made in the student's
kernel, with the same arguments, or failing that with arguments of the same shape (a
randomly initialised model differs in its numbers only). A call that was never recorded
raises :class:`NotRecorded`, a ``BaseException`` so that a test's ``except Exception``
cannot swallow it.
"""
from __future__ import annotations

import builtins
import importlib
import json
import os
import sys
from collections import defaultdict

from autograder import plaindata
from autograder.recorder import call_key, function_ref, object_ref

# Modules a recorded answer may name (``import torch`` in an answer cell): importing
# them runs only installed, trusted code.
IMPORTABLE = {"torch", "numpy", "math", "cmath", "random", "time", "statistics",
              "functools", "itertools", "collections", "operator", "typing", "dataclasses",
              "fractions", "decimal", "timeit", "gpucourse", "matplotlib"}
MAX_LINE = 64 * 1024 * 1024


_FRESH: dict = {}  # the state a fresh clean-room kernel starts each check with


def fresh_start(shell) -> None:
    """Begin a check as a freshly started clean-room kernel would (see cleanroom.CleanRoom).

    The first call, before any notebook cell has run, notes the kernel's starting state;
    each later call empties the user namespace and puts that state back. Imported
    modules stay loaded: that is what a warm kernel is for.
    """
    import random

    import numpy
    import torch

    from autograder import recorder

    recorder.stop()  # the clean room records nothing
    if not _FRESH:
        _FRESH.update(cwd=os.getcwd(), path=list(sys.path), random=random.getstate(),
                      numpy=numpy.random.get_state(), torch=torch.get_rng_state(),
                      dtype=torch.get_default_dtype(), grad=torch.is_grad_enabled(),
                      threads=torch.get_num_threads())
        return
    shell.reset(new_session=False)
    os.chdir(_FRESH["cwd"])
    sys.path[:] = _FRESH["path"]
    random.setstate(_FRESH["random"])
    numpy.random.set_state(_FRESH["numpy"])
    torch.set_rng_state(_FRESH["torch"])
    torch.set_default_dtype(_FRESH["dtype"])
    torch.set_grad_enabled(_FRESH["grad"])
    torch.set_num_threads(_FRESH["threads"])


class NotRecorded(BaseException):
    """The student's kernel left no answer for this; the test cannot pass on it."""


class Replay:
    def __init__(self, log_path: str, answer_names):
        self.answer_names = list(answer_names)
        self.values: dict[str, object] = {}
        # A kernel that died and was restarted starts numbering its cells and functions
        # again: each start of the audit log begins a new session.
        self.session = 0
        self.cells: list[tuple[tuple, str, dict]] = []  # ((session, cell), hash, names)
        self.calls: dict[tuple, list[dict]] = defaultdict(list)  # ((session, cell), fn)
        self.used: set[int] = set()  # id() of call entries already replayed
        self.cursor = -1
        self.answer_fids: set[int] = set()
        self.bad_lines = 0
        self.tainted = False  # see _resolve
        self._read(log_path)

    def _read(self, log_path: str) -> None:
        with open(log_path, "rb") as f:
            for raw in f:
                if len(raw) > MAX_LINE:
                    self.bad_lines += 1
                    continue
                try:
                    entry = json.loads(raw)
                    self._take(entry)
                except (ValueError, TypeError, KeyError, AttributeError):
                    self.bad_lines += 1

    def _take(self, entry: dict) -> None:
        kind = entry.get("t")
        if kind == "audit" and entry.get("event") == "install":
            self.session += 1
        elif kind == "value":
            self.values[str(entry["d"])] = entry["v"]
        elif kind == "cell":
            self.cells.append(((self.session, int(entry["n"])), str(entry["src"]),
                               dict(entry["names"])))
        elif kind == "call":
            self.calls[((self.session, int(entry["cell"])), int(entry["fn"]))].append(entry)

    # -- binding names -------------------------------------------------------------
    def bind(self, ns: dict, hashes, required: bool) -> None:
        """Bind the answer names as they were before the student's kernel ran this cell.

        ``hashes`` are the cell's source hashes (as written, and as nbgrader ran it).
        Cells are matched in order; a required cell (a test) that the student's kernel
        never ran cannot pass.
        """
        wanted = set(hashes)
        for i in range(self.cursor + 1, len(self.cells)):
            if self.cells[i][1] in wanted:
                self.cursor = i
                break
        else:
            if required:
                raise NotRecorded("the student's kernel never ran this test cell")
            return
        names = self.cells[self.cursor][2]
        self.answer_fids = set()
        for name in self.answer_names:
            data = self.values.get(names.get(name)) if isinstance(names.get(name), str) else None
            if isinstance(data, dict) and data.get("kind") == "fn" and data.get("$") == "ref":
                self.answer_fids.add(data.get("id"))
        for name in self.answer_names:
            value_id = names.get(name)
            try:
                ns[name] = self.value(value_id)
            except (NotRecorded, Exception):  # hostile data: any failure unbinds the name
                ns.pop(name, None)  # a test that uses it fails with a NameError

    def value(self, value_id):
        if not isinstance(value_id, str) or value_id not in self.values:
            raise NotRecorded("no value recorded")
        return plaindata.decode(self.values[value_id], self._resolve)

    def _resolve(self, ref: dict):
        kind = ref.get("kind")
        if kind == "fn":
            return self._stub(int(ref["id"]), str(ref["name"]))
        if kind == "module":
            return _import(str(ref["name"]))
        if kind == "attr":
            target = _import(str(ref["module"]))
            for part in str(ref["name"]).split("."):
                target = getattr(target, part)
            if callable(target):
                # A library function or class the tests might call (torch.set_default_device
                # in place of an answer): what it changes could outlast this check, so the
                # clean room does not keep this kernel for the next submission.
                self.tainted = True
            return target
        raise ValueError(f"unknown reference {kind!r}")

    # -- stubs for the student's functions ------------------------------------------
    def _stub(self, fid: int, name: str):
        replay = self

        def stub(*args, **kwargs):
            return replay._replay_call(fid, name, args, kwargs)

        stub.__name__ = name.rsplit(".", 1)[-1]
        stub.__qualname__ = name
        stub.__course_grade_fid__ = fid
        return stub

    def _refs(self, value):
        fid = getattr(value, "__course_grade_fid__", None) if callable(value) else None
        if isinstance(fid, int):
            return function_ref(fid, value.__qualname__)
        return object_ref(value)

    def _replay_call(self, fid, name, args, kwargs):
        try:
            key, shape = call_key(args, kwargs, self._refs)[:2]
        except plaindata.Unencodable as exc:
            raise NotRecorded(f"{name}(...): its arguments have no plain form ({exc})")
        entry = self._find_call(fid, key, shape)
        if entry is None:
            raise NotRecorded(f"the student's kernel recorded no call of {name} "
                              "with these arguments in this cell")
        self.used.add(id(entry))
        for slot, value_id in dict(entry.get("changed") or {}).items():
            target = args[int(slot)] if slot.isdigit() else kwargs[slot]
            _overwrite(target, self.value(value_id))
        if "exc" in entry:
            raise _exception(entry["exc"])
        if "result" not in entry:
            raise NotRecorded(f"{name} returned nothing the clean room can check")
        return self.value(entry["result"])


    def _find_call(self, fid: int, key: str, shape: str):
        if self.cursor < 0:
            return None
        cell = self.cells[self.cursor][0]
        # Calls made from inside another student function are not the tests' calls.
        candidates = [c for c in self.calls.get((cell, fid), ())
                      if id(c) not in self.used and c.get("parent") not in self.answer_fids]
        for field_name, wanted in (("args", key), ("shape", shape)):
            for entry in candidates:
                if entry.get(field_name) == wanted:
                    return entry
        return None


def _import(name: str):
    if name.split(".")[0] not in IMPORTABLE:
        raise ImportError(f"the clean room does not import {name!r}")
    return importlib.import_module(name)


def _exception(record: dict) -> BaseException:
    cls = getattr(builtins, str(record.get("type")), None)
    message = str(record.get("msg", ""))
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        return NotRecorded(f"the student's function stopped the kernel's run: {message}")
    try:
        return cls(message)
    except TypeError:
        return RuntimeError(message)


def _overwrite(target, new) -> None:
    """Repeat an in-place change the student's function made to an argument."""
    import torch

    if isinstance(target, torch.Tensor) and isinstance(new, torch.Tensor):
        target.data = new  # its numbers, dtype, shape and device, as the student's left it
    elif isinstance(target, list) and isinstance(new, list):
        target[:] = new
    elif isinstance(target, dict) and isinstance(new, dict):
        target.clear()
        target.update(new)
    else:
        raise NotRecorded("the student's function changed an argument in a way "
                          "the clean room cannot repeat")
