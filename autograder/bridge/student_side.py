"""Runs in the student's kernel: answers the bridge's requests (``autograder.bridge.protocol``).

This is trusted code in an untrusted process. The student's notebook ran here first and
may have replaced any of it; that is fine, because everything this module can send is a
reply of plain data, which the test kernel decodes into values of its own. A replaced
``serve`` can only state answers, and stating the right answers means knowing them. A
call's record of copies and host reads (``copy_record``) is such a statement too, but
stating the right method needs no hidden knowledge: a notebook that replaces
``copy_record`` or edits what it returns claims a right answer's record (outside attack 52).
What must hold is the other direction: for an honest notebook, answering changes
nothing the notebook can see, and never raises.
"""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Sequence

from autograder.bridge import plaindata, protocol


def serve(shell, prompt: str) -> None:
    """Answer one request: publish the reply as a display_data of ``REPLY_MIME``."""
    try:
        request = protocol.request_body(prompt)
        if request.get("op") == "describe":
            reply = describe(shell.user_ns, request["names"], request.get("functions") or [])
        elif request.get("op") == "call":
            reply = call(shell.user_ns, request)
        else:
            reply = {"failed": "unknown request"}
        text = protocol.dumps(reply)
    except Exception as exc:  # noqa: BLE001 - the reply says what went wrong
        text = protocol.dumps({"unreadable": protocol.message_text(f"{type(exc).__name__}: {exc}")})
    from IPython.display import publish_display_data

    publish_display_data({protocol.REPLY_MIME: text})


def describe(namespace: dict, names: list[str], functions: Sequence[str] = ()) -> dict:
    """Each answer as data; an answer the tests call (``functions``) that can be called is
    a function, whatever else it is (an ``nn.Module`` whose forward does the work would
    otherwise cross as a model, without its forward)."""
    values = []
    for name in names:
        if name not in namespace:
            values.append([name, protocol.MISSING])
            continue
        value = namespace[name]
        if name in functions and builtins.callable(value):
            values.append([name, protocol.FUNCTION])
            continue
        try:
            values.append([name, plaindata.encode(value)])
        except Exception as exc:  # noqa: BLE001 - one answer that cannot be sent hides no other
            if builtins.callable(value):
                values.append([name, protocol.FUNCTION])
            else:
                values.append([name, {"$": protocol.UNREADABLE, "why": protocol.message_text(exc)}])
    return {"values": values}


def call(namespace: dict, request: dict) -> dict:
    name = request["name"]
    function = namespace.get(name)
    if function is None or not builtins.callable(function):
        return {"failed": f"`{name}` is not a function in your notebook"}
    keys = [str(k) for k, _ in request["kwargs"]]
    values = plaindata.decode_values(list(request["args"]) + [v for _, v in request["kwargs"]])
    args, kwargs = values[: len(request["args"])], dict(zip(keys, values[len(request["args"]) :]))
    record = [] if request.get("record") is True else None
    try:
        with _recording(record, args + list(kwargs.values())) as recording:
            with pinning_copies_without_a_gpu():
                result = function(*args, **kwargs)
    except KeyboardInterrupt:
        return {
            "raised": {
                "type": "TimeoutError",
                "message": f"{name}(...) was stopped: it took too long",
            }
        }
    except BaseException as exc:  # noqa: BLE001 - the test decides what an error means
        return {"raised": {"type": type(exc).__name__, "message": protocol.message_text(exc)}}
    identities = {id(a): {"$": "arg", "i": i} for i, a in enumerate(args)}
    identities.update({id(v): {"$": "kwarg", "k": k} for k, v in kwargs.items()})
    try:
        data = plaindata.encode(result, ref=lambda v: identities.get(id(v)))
    except plaindata.Unencodable as exc:
        return {"unreadable": protocol.message_text(exc)}
    if record is not None:
        record.extend(recording.results(result))  # which copies the result's data came from
    return {"ok": data, **_after(args, kwargs), **({} if record is None else {"record": record})}


def _after(args: list, kwargs: dict) -> dict:
    """The state of each argument a call can change in place (None for the others). One
    that cannot be sent is said to be so, on its own: a "None" would read as "nothing to
    send", and the others' states still come back."""
    values = [v if plaindata.mutable(v) else None for v in args + list(kwargs.values())]
    try:
        after = plaindata.encode_values(values)
    except plaindata.Unencodable:
        after = [_one_after(v) for v in values]
    return {
        "args": after[: len(args)],
        "kwargs": [[k, a] for k, a in zip(kwargs, after[len(args) :])],
    }


def _one_after(value) -> object:
    try:
        return plaindata.encode_values([value])[0]
    except plaindata.Unencodable as exc:
        return {"$": protocol.UNREADABLE, "why": protocol.message_text(exc)}


def pinning_copies_without_a_gpu():
    """A context in which, on a machine without a GPU, ``Tensor.pin_memory()`` copies the
    tensor instead of raising: a batch pinned for a GPU's copy is right, and the tests run
    on the CPU and ``meta``. PyTorch's own ``DataLoader(pin_memory=True)`` pins nothing
    there either. The checks cells call the same way."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def copying():
        kept = torch.Tensor.__dict__.get("pin_memory")
        torch.Tensor.pin_memory = lambda self, *args, **kwargs: self.clone()
        try:
            yield
        finally:
            if kept is None:
                del torch.Tensor.pin_memory  # it was inherited
            else:
                torch.Tensor.pin_memory = kept

    accelerator = getattr(torch, "accelerator", None)
    if torch.cuda.is_available() or (accelerator is not None and accelerator.is_available()):
        return contextlib.nullcontext()
    return copying()


# -- a record of what crossed between devices ------------------------------------------------
MAX_RECORD = 1000  # copies kept in one record; a test needs the first few


def _torch_safe_globals() -> frozenset:
    """What PyTorch itself declared safe for weights-only loading (nested tensors...), as it
    was when this module was imported: in a kernel's template, or at a kernel's start,
    before any notebook code (empty where torch was not imported yet: then a load of such
    objects in a recorded call is loaded as asked, and said unseen)."""
    unpickler = sys.modules.get("torch._weights_only_unpickler")
    return frozenset(getattr(unpickler, "_marked_safe_globals_set", ()))


TORCH_SAFE_GLOBALS = _torch_safe_globals()
# Each recorded call's look at a fork on its threads (``os.register_at_fork``, once).
_FORK_WATCHERS: list = []


def _forking() -> None:
    for watcher in list(_FORK_WATCHERS):
        watcher()


os.register_at_fork(before=_forking)
# The entry that ends the copies of a record whose call ran reads or copies its dispatch mode
# did not see (``copy_record``): ``[UNSEEN, "", "", "", "", how many]``.
UNSEEN = "unseen"


def _recording(record, arguments):
    """A context that appends to ``record`` each copy the call makes from one device to
    another (``copy_record``), or does nothing when ``record`` is None."""
    import contextlib

    if record is None:
        return contextlib.nullcontext()
    return copy_record(record, arguments)


class _no_stderr:
    """File descriptor 2 on /dev/null for a moment: PyTorch's profiler writes a line there
    (from C++) as it starts and stops, which the kernel would show as the student's output."""

    def __enter__(self):
        import os

        self.kept = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)

    def __exit__(self, *exc):
        import os

        os.dup2(self.kept, 2)
        os.close(self.kept)


def copy_record(record: list, arguments=()):
    """A ``TorchDispatchMode`` that lets every operation run as it would, and appends to
    ``record`` one entry per copy between two devices: ``[op, from_device, to_device,
    from_dtype, to_dtype, numel]``, all plain strings and an int; and one per value read on
    the host: ``[op, device, "host", dtype, dtype, numel]``.

    - Copies: ``aten._to_copy`` (``.to``, ``.cuda``) and ``aten.copy_`` (``x.copy_(src)``,
      ``x[...] = src``); a tensor made on a device from data on the host (``torch.tensor``,
      ``torch.as_tensor``, ``torch.asarray``, ``Tensor.new_tensor``) and each tensor
      ``torch.load`` puts on a device: copies from the CPU, in the dtype the data was made
      in there. A copy that also converts (``.to(device, torch.float32)``) is recorded
      with both dtypes: a blocking copy from the CPU converts there, before the link
      (PyTorch's ``Copy.cu``).
    - Reads: ``.item()``, ``float(t)``, an ``if`` on a tensor, and a tensor printed,
      formatted, made a list or a NumPy array, pickled, or saved with ``torch.save``
      (which read without an op a dispatch mode sees).
    - In the call's threads: its own, the threads it starts and the work it gives a
      ``ThreadPoolExecutor`` (waited for, 2 s at most, when the call returns); in any
      other thread, a read of a tensor the call made (a logger fed through a queue).
    - Each is recorded before it runs, so a read that fails (any read on ``meta``) is still
      one. One read or copy is one entry, whatever it runs inside.
    - Where each copy's data goes: every op the call's threads run passes on the copies its
      tensors' data came from to what it makes or writes, so ``results(value)`` can say,
      for a tensor the call returned, ``["result", device, device, dtype, dtype, i]`` for
      each recorded copy ``i`` it came from (for a model, its weights did). ``call`` adds those entries at the end. On
      ``meta``, where no value can be compared, that tells a result computed on the device
      from what crossed from one made there with no values at all.
    - Data the host holds is not a read: the call's tensor ``arguments`` on the CPU (each
      given as is, or in a list, tuple or dict: a batch as a loader gives it), and what the
      call's threads compute from them alone on the CPU without moving them (``.to`` with a
      device is a move, even to the CPU, as it would be to a GPU). Reading those waits for
      no device, so checking a batch's labels before the step costs nothing (a right
      ``train_step`` that did so lost 2 points). Anything that touches other data, such as
      a model's weights, is no longer the host's, nor is memory that other data was
      written into through any tensor over it (a storage's ``copy_``, an alias made with
      ``torch.from_numpy``), nor a tensor whose storage changed without an op
      (``t.data = ...``).

    - What the mode did not see: the call's own thread also runs under PyTorch's profiler
      (the legacy one, this thread only), which sees every op whatever the dispatch modes
      are; a read or copy op it saw that the mode did not (run with the modes switched off:
      ``_disable_current_modes``, ``torch._C._DisableTorchDispatch``) ends the record with
      ``[UNSEEN, "", "", "", "", n]``, as does a profiler that was stopped or could not
      start, a profiler of the call's own still running when it returns, and a fork while
      the call runs, on any thread (the child records in its own copy). The bridge then withholds the
      test's points, and says why. Ops inside another
      op's kernel are not the call's (only those inside a composite op, which the mode
      sees, are); those inside a wrapped read above are that read's.

    The exercises' checks cell records the same way where there is no course-grade (without
    the profiler's second look)."""
    import _thread
    import collections
    import concurrent.futures.thread
    import threading
    import time
    import weakref

    import torch
    import torch.utils._pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode

    LIMIT = MAX_RECORD
    aten = torch.ops.aten
    caller = threading.get_ident()  # the call's own thread: the profiler's look is here only
    watched = ("_local_scalar_dense", "_to_copy", "copy_")  # the ops of reads and copies
    READ_RANGE = "course-grade: a read"  # a profiler range around each wrapped read here
    on = [True]  # the call is running: what it reads and copies is recorded until it returns
    stacks: dict = {}  # thread -> the reads and copies being recorded in it: what runs inside is theirs
    started: list = []  # threads and futures the call started: waited for (2 s at most) at its end
    own = {threading.get_ident()}  # the call's threads: everything they read or copy is its
    made: dict = {}  # id -> weak reference: tensors the call's threads made (ops' results)
    theirs = weakref.WeakSet()  # threads the call's threads started: the call's too
    hosts: dict = {}  # id -> (weak reference, storage address): data the host holds
    written_over: set = set()  # (start, end): memory that other data was written into
    sources: dict = {}  # id -> (weak reference, indices): the recorded copies a storage's data came from

    def span(t) -> tuple:
        try:
            storage = t.untyped_storage()
            return storage.data_ptr(), storage.data_ptr() + storage.nbytes()
        except Exception:  # noqa: BLE001 - a tensor without a plain storage is not the host's
            return -1, -1

    def hold(t, fresh=False) -> None:
        if t.device.type == "cpu" and type(t) is torch.Tensor and len(hosts) < 100_000:
            key, (start, end) = id(t), span(t)
            if fresh:  # filled from the host's data: what was written there before is gone
                written_over.difference_update(
                    [(a, b) for a, b in written_over if a < end and start < b]
                )
            hosts[key] = (
                weakref.ref(
                    t, lambda ref, key=key: hosts.get(key, (0,))[0] is ref and hosts.pop(key)
                ),
                start,
            )

    def write_over(t) -> None:
        """Other data was written into ``t``, through it or any tensor over its memory (a
        storage's ``copy_``, ``torch.from_numpy(t.numpy())``): none of that memory is the
        host's alone any more."""
        hosts.pop(id(t), None)
        start, end = span(t)
        if start != -1:  # a set: a model's weights, written every step, are there once
            written_over.add((start, end) if len(written_over) < 10_000 else (0, 2**64))

    def on_the_host(t) -> bool:
        kept = hosts.get(id(t))
        if kept is None or kept[0]() is not t:
            return False
        # The same memory (not swapped by ``t.data = ...``), and never written over.
        start, end = span(t)
        return kept[1] == start != -1 and not any(a < end and start < b for a, b in written_over)

    def data_in(given) -> list:
        """A batch as a loader gives it: a tensor, or the tensors in a list, tuple or dict."""
        items = given.values() if isinstance(given, dict) else given
        return list(items) if isinstance(given, (dict, list, tuple)) else [given]

    for t in [t for given in arguments for t in data_in(given)]:
        if isinstance(t, torch.Tensor):
            hold(t)

    def inside() -> list:
        return stacks.setdefault(threading.get_ident(), [])

    def note(*entry):
        """Append an entry; its index in the record, or None where it is not recorded."""
        if on[0] and not inside() and len(record) < LIMIT:
            record.append([*entry])
            return len(record) - 1
        return None

    def storage_of(t):
        try:
            return t.untyped_storage()
        except Exception:  # noqa: BLE001 - a tensor without a plain storage carries no marks
            return None

    def came_from(t) -> frozenset:
        storage = storage_of(t)
        kept = None if storage is None else sources.get(id(storage))
        return kept[1] if kept is not None and kept[0]() is storage else frozenset()

    def carry(t, marks) -> None:
        """``t``'s memory holds data that came from the copies ``marks`` (and what it held
        before). Kept per storage: a write through a view (``out[i] = ...``) marks the
        whole buffer, and every view of it."""
        storage = storage_of(t) if marks and isinstance(t, torch.Tensor) else None
        if storage is not None and len(sources) < 100_000:
            key, marks = id(storage), frozenset(marks) | came_from(t)
            sources[key] = (
                weakref.ref(
                    storage,
                    lambda ref, key=key: sources.get(key, (0,))[0] is ref and sources.pop(key),
                ),
                marks,
            )

    def name_of(dtype) -> str:
        return str(dtype).removeprefix("torch.")

    def remember(value) -> None:
        for t in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(t, torch.Tensor) and len(made) < 100_000:
                key = id(t)  # forgotten when the tensor goes (its id may come back)
                made[key] = weakref.ref(
                    t, lambda ref, key=key: made.get(key) is ref and made.pop(key)
                )

    def the_calls(t) -> bool:
        """A read is the call's in its own threads, and in any other thread (one running
        before the call, fed through a queue) where the tensor is one the call made."""
        if threading.get_ident() in own:
            return True
        kept = made.get(id(t))
        return kept is not None and kept() is t

    def tensors_in(value, found=None, seen=None, depth=0) -> list:
        """The tensors an object holds (containers, models, objects' attributes), bounded."""
        found, seen = ([], set()) if found is None else (found, seen)
        if len(found) >= LIMIT or depth > 8 or id(value) in seen:
            return found
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, torch.nn.Module):
            found.extend(list(value.parameters())[:LIMIT] + list(value.buffers())[:LIMIT])
        elif isinstance(value, (str, bytes, bytearray, int, float, complex, type(None))):
            pass
        elif isinstance(value, dict):
            for item in list(value.values())[:LIMIT]:
                tensors_in(item, found, seen, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset, collections.deque)):
            for item in list(value)[:LIMIT]:
                tensors_in(item, found, seen, depth + 1)
        elif hasattr(value, "__dict__"):  # a dataclass, a namespace, any object
            for item in list(vars(value).values())[:LIMIT]:
                tensors_in(item, found, seen, depth + 1)
        return found

    def read(t, op) -> None:
        if isinstance(t, torch.Tensor) and the_calls(t) and not on_the_host(t):
            dtype = name_of(t.dtype)
            note(op, t.device.type, "host", dtype, dtype, int(t.numel()))

    def decided_by_values(func, args) -> bool:
        """An op whose result (``equal``) or shape (``nonzero``, a boolean mask) the host
        must know the values for: on a GPU it waits for them, as a read does."""
        if torch.Tag.data_dependent_output in func.tags:
            return True
        if func.overloadpacket in (aten.index, aten.index_put, aten.index_put_):
            masks = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
            return any(
                isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in masks
            )
        return torch.Tag.dynamic_output_shape in func.tags

    def written(func, args, kwargs) -> list:
        """The arguments an op writes in place (``add_``'s self, ``out=``, a foreach list)."""
        schema = func._schema.arguments
        named = {a.name: a for a in schema}
        pairs = [*zip(schema, args), *((named.get(k), v) for k, v in kwargs.items())]
        return [
            v
            for a, v in pairs
            if a is not None and a.alias_info is not None and a.alias_info.is_write
        ]

    def arrived(tensors, op) -> None:
        """Each storage ``torch.load`` put on a device: all of it crossed, in the loaded
        tensor's dtype (a small view of a large storage brings the whole storage)."""
        storages = set()
        for t in tensors if threading.get_ident() in own else ():
            if t.device.type == "cpu" or t.untyped_storage()._cdata in storages:
                continue
            storages.add(t.untyped_storage()._cdata)
            numel = t.untyped_storage().nbytes() // max(1, t.element_size())
            index = note(op, "cpu", t.device.type, name_of(t.dtype), name_of(t.dtype), int(numel))
            carry(t, () if index is None else (index,))

    def nested(name, function, before=None, after=None):
        def wrapper(*args, **kwargs):
            if before is not None:
                before(*args)
            inside().append(name)
            try:
                if look.profile is not None and threading.get_ident() == caller:
                    # What a read runs (printing turns the modes off) is the read's: the
                    # profiler's look leaves it out, by this range.
                    look.reads += 1
                    with torch.autograd.profiler.record_function(READ_RANGE):
                        out = function(*args, **kwargs)
                else:
                    out = function(*args, **kwargs)
            finally:
                inside().pop()
            if after is not None:
                after(out, *args)
            return out

        return wrapper

    def host_read(name, method):
        return nested(name, method, before=lambda t, *_: read(t, name))

    def loaded(name, load):
        def weights_only(*args, **kwargs):
            """``torch.load`` as PyTorch's weights-only unpickler does it, whatever the call
            asked: unpickling anything else runs code the file names, inside this read,
            where nothing is recorded (attack 42 read the loss there). A state_dict loads
            the same way. What cannot be loaded so is loaded as asked, and the look is
            not sure."""
            if threading.get_ident() not in own:
                return load(*args, **kwargs)
            source = args[0] if args else kwargs.get("f")
            where = source.tell() if hasattr(source, "seek") and hasattr(source, "tell") else None
            # Only PyTorch's own allowlist: a function the notebook declared safe
            # (``add_safe_globals``, ``safe_globals``) is called by the unpickler, inside this
            # read (attack 43 read the loss in one). The set itself is swapped, not through
            # functions the notebook could have replaced.
            unpickler = torch._weights_only_unpickler
            theirs = unpickler._marked_safe_globals_set
            unpickler._marked_safe_globals_set = set(TORCH_SAFE_GLOBALS)
            try:
                return load(*args, **{**kwargs, "weights_only": True})
            except Exception:  # noqa: BLE001 - loaded as asked below, and said unsure
                look.missed += 1
                if where is None:
                    raise
                unpickler._marked_safe_globals_set = theirs
                source.seek(where)
                return load(*args, **kwargs)
            finally:
                unpickler._marked_safe_globals_set = theirs

        return nested(name, weights_only, after=lambda out, *_: arrived(tensors_in(out), name))

    def made_from_data(name, factory):
        def after(out, data=None, *rest):
            if name in ("new_tensor", "new"):  # methods: the data follows the tensor
                data = rest[0] if rest else None
                if name == "new" and (data is None or isinstance(data, (int, torch.Size))):
                    return  # Tensor.new(2, 3), .new(size): a shape, no data
                if name == "new" and isinstance(data, (torch.TypedStorage, torch.UntypedStorage)):
                    return  # a tensor over a storage it was given: no copy
            source = data.device.type if isinstance(data, torch.Tensor) else "cpu"
            mine = threading.get_ident() in own  # another thread's copies are not the call's
            if mine and isinstance(out, torch.Tensor) and out.device.type != source:
                kind = data.dtype if isinstance(data, torch.Tensor) else out.dtype
                index = note(
                    name,
                    source,
                    out.device.type,
                    name_of(kind),
                    name_of(out.dtype),
                    int(out.numel()),
                )
                carry(out, () if index is None else (index,))
            elif mine and isinstance(out, torch.Tensor) and out.device.type == "cpu":
                # Made on the host from the host's values (a list, a NumPy array, host data):
                # host data too. A fresh copy of a list overwrites whatever was there before.
                if not isinstance(data, torch.Tensor) or on_the_host(data):
                    hold(out, fresh=isinstance(data, (list, tuple, int, float, bool)))

        return nested(name, factory, after=after)

    def made_on_the_host(name, factory):
        """``torch.from_numpy``, ``torch.frombuffer``: a tensor over the host's own memory."""

        def after(out, *_):
            if threading.get_ident() in own and isinstance(out, torch.Tensor):
                hold(out)

        return nested(name, factory, after=after)

    def tracked(name, start):
        """A thread the call starts is the call's (another thread's timer is not)."""

        def wrapper(self, *args, **kwargs):
            if threading.get_ident() not in own:
                return start(self, *args, **kwargs)
            theirs.add(self)
            out = start(self, *args, **kwargs)
            started.append(self)
            return out

        return wrapper

    def running_as_the_calls(function):
        """Run ``function`` as one of the call's threads, under a record of its own."""
        me = threading.get_ident()
        added = me not in own
        own.add(me)
        try:
            with Dispatch():
                return function()
        finally:
            if added:
                own.discard(me)

    def submitted(name, submit):
        """Work for a pool's thread, even one that was running before the call."""

        def wrapper(self, fn, /, *args, **kwargs):
            if threading.get_ident() not in own:  # another thread's work, not the call's
                return submit(self, fn, *args, **kwargs)
            future = submit(self, lambda: running_as_the_calls(lambda: fn(*args, **kwargs)))
            started.append(future)
            return future

        return wrapper

    def raw_thread(name, start_new):
        """A thread the call starts with ``_thread`` rather than ``threading`` (attack 42 read
        the loss in one) is started as a ``threading.Thread``: the call's like any other."""

        def wrapper(function, args=(), kwargs=None, /):
            if threading.get_ident() not in own:
                return start_new(function, args, *(() if kwargs is None else (kwargs,)))
            thread = threading.Thread(
                target=function, args=tuple(args), kwargs=dict(kwargs or {}), daemon=True
            )
            thread.start()
            return thread.ident

        return wrapper

    def recorded_thread(name, bootstrap):
        def wrapper(thread):
            if thread in theirs:
                running_as_the_calls(lambda: bootstrap(thread))
            else:
                bootstrap(thread)

        return wrapper

    # Reads without an op a dispatch mode sees (printing turns the modes off; pickling and
    # torch.save reduce each tensor), and the reads that are ops, for threads the mode is
    # not on in (one running before the call): Python looks each up on the class.
    reads = ("__repr__", "__format__", "tolist", "numpy", "__array__", "__reduce_ex__")
    reads += ("item", "__float__", "__int__", "__bool__", "__index__", "__dlpack__")
    wrapped = [(torch.Tensor, n, host_read) for n in reads]
    wrapped += [(torch, n, made_from_data) for n in ("tensor", "as_tensor", "asarray")]
    # Tensor.new(list) is the legacy form of new_tensor: a thirteenth outside attack's
    # float32 batch crossed unseen through it.
    wrapped += [(torch.Tensor, n, made_from_data) for n in ("new_tensor", "new")]
    wrapped += [(torch, n, made_on_the_host) for n in ("from_numpy", "frombuffer")]
    wrapped += [(torch, "load", loaded), (torch.serialization, "load", loaded)]
    wrapped += [(torch.utils.dlpack, "to_dlpack", host_read)]
    # Ops whose result holds none of their tensors' values: only shapes, dtypes, devices.
    shape_only = {aten.empty_like, aten.zeros_like, aten.ones_like, aten.full_like}
    shape_only |= {aten.rand_like, aten.randn_like, aten.randint_like, aten.new_empty}
    shape_only |= {aten.new_empty_strided, aten.new_zeros, aten.new_ones, aten.new_full}
    wrapped += [
        (threading.Thread, "start", tracked),
        (threading.Thread, "_bootstrap_inner", recorded_thread),
    ]
    wrapped += [(concurrent.futures.ThreadPoolExecutor, "submit", submitted)]
    wrapped += [
        (_thread, n, raw_thread) for n in ("start_new_thread", "start_new") if hasattr(_thread, n)
    ]

    START = "course-grade: the call"
    OP = 0  # an event's scope when it is an op (RecordScope::FUNCTION); a range is 7
    composite: dict = {}

    class SecondLook:
        """PyTorch's legacy profiler on the call's thread (2 ms to start; kineto's takes a
        CPU second at its first use in a process), in segments: a profiler the call starts
        itself (a right step may profile itself) takes the thread's only place, so the look
        stops before it, checking what ran until then, and starts again once it stops."""

        def __init__(self):
            self.profile = None  # ours, while it runs
            self.theirs = None  # the call's own, while it runs
            self.missed = 0  # reads and copies the mode did not see (1 where not sure)
            self.seen: collections.Counter = collections.Counter()  # watched ops the mode saw
            self.reads = 0  # READ_RANGEs the wrappers made

        def begin(self) -> None:
            self.seen.clear()
            self.reads = 0
            try:
                profile = torch.autograd.profiler.profile(use_kineto=False)
                with _no_stderr():  # its start and stop say so on stderr: not the student's
                    profile.__enter__()
                with torch.autograd.profiler.record_function(START):
                    pass  # finds this thread among the profiler's
            except Exception:  # noqa: BLE001 - one running already, from before: not sure
                self.missed += 1
                return
            self.profile = profile

        def end(self) -> None:
            profile, self.profile = self.profile, None
            if profile is not None:
                self.missed += unseen_in(profile)

    look = SecondLook()

    def forked() -> None:
        """A fork while the call runs (``os.fork``, multiprocessing's fork, a
        ``preexec_fn``), on any thread: what the child reads or copies is in the child's
        copy of the record, never this one (attack 43 read the loss in a child and piped it
        back; attack 44 did it from a thread started before the call)."""
        if on[0]:
            look.missed += 1

    def unseen_in(profile) -> int:
        """Reads and copies the profiler saw on the call's thread that the mode did not (1
        where its look cannot be trusted: stopped, its start lost, a read range the wrappers
        did not make)."""
        try:
            with _no_stderr():
                profile.__exit__(None, None, None)
            events = list(profile.function_events)
        except Exception:  # noqa: BLE001 - no profile (the call stopped it): not sure
            return 1
        start = [e for e in events if e.name == START]
        if len(start) != 1:
            return 1
        here = [e for e in events if e.thread == start[0].thread]
        if sum(e.name == READ_RANGE for e in here) != look.reads:
            return 1  # a range the wrappers did not make: someone else's
        seen: collections.Counter = collections.Counter()
        for event in here:
            name = event.name.removeprefix("aten::")
            if event.scope == OP and name in watched and the_calls_own(event):
                seen[name] += 1
        return sum(max(0, seen[n] - look.seen[n]) for n in watched)

    def profiler_starts(name, start):
        def wrapper(profile, *args, **kwargs):
            if look.profile is None or profile is look.profile or threading.get_ident() != caller:
                return start(profile, *args, **kwargs)
            look.end()  # what ran before theirs is looked at now
            try:
                out = start(profile, *args, **kwargs)
            except BaseException:
                # Theirs did not start (attack 43 prepared ``object()``, which raises): ours
                # looks again at once, never waiting for an exit that will not come.
                look.begin()
                raise
            look.theirs = profile
            return out

        return wrapper

    def profiler_stops(name, stop):
        def wrapper(profile, *args, **kwargs):
            out = stop(profile, *args, **kwargs)
            if profile is look.theirs:
                look.theirs = None
                look.begin()
            return out

        return wrapper

    wrapped += [
        (torch.autograd.profiler.profile, "_prepare_trace", profiler_starts),
        (torch.autograd.profiler.profile, "__exit__", profiler_stops),
    ]

    def the_calls_own(event) -> bool:
        """An op the call itself ran, which the mode sees: not one inside a wrapped read,
        nor one inside another op's kernel (only inside composite ops, which decompose
        before the mode, such as ``item`` into ``_local_scalar_dense``)."""
        parent = event.cpu_parent
        while parent is not None:
            if parent.name == READ_RANGE:
                return False
            if parent.scope == OP:  # an op, never a range named like one
                if parent.name not in composite:
                    try:
                        composite[parent.name] = torch._C._dispatch_has_kernel_for_dispatch_key(
                            parent.name, "CompositeImplicitAutograd"
                        )
                    except Exception:  # noqa: BLE001 - not an op the dispatcher knows
                        composite[parent.name] = False
                if not composite[parent.name]:
                    return False
            parent = parent.cpu_parent
        return True

    class Dispatch(TorchDispatchMode):
        """Each copy between devices and each read on the host, seen before it runs (a read
        that fails, as any does on meta, is still recorded); the tensors each op makes."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            packet = func.overloadpacket
            if packet.__name__ in watched and threading.get_ident() == caller and not inside():
                look.seen[packet.__name__] += 1
            leaves = pytree.tree_leaves((args, kwargs))
            given = [a for a in leaves if isinstance(a, torch.Tensor)]
            # An op given a storage (``set_``) takes its data from there: never the host's.
            held = given and all(on_the_host(a) for a in given)
            held = held and not any(
                isinstance(a, (torch.UntypedStorage, torch.TypedStorage)) for a in leaves
            )
            # What the op makes or writes holds data from the copies its tensors came from,
            # unless it reads only their shape, dtype and device (empty_like, zeros_like).
            marks = set()
            if sources and packet not in shape_only:
                marks = set().union(*(came_from(a) for a in given))
            if decided_by_values(func, args) and not held:  # .item(), an if: _local_scalar_dense
                read(given[0] if given else None, packet.__name__)
            elif packet in (aten._to_copy, aten.copy_):
                source = args[0] if packet is aten._to_copy else args[1]
                if packet is aten._to_copy:
                    device = torch.device(kwargs.get("device") or source.device)
                    dtype = kwargs.get("dtype") or source.dtype
                else:
                    device, dtype = args[0].device, args[0].dtype
                if isinstance(source, torch.Tensor) and source.device.type != device.type:
                    index = note(
                        packet.__name__,
                        source.device.type,
                        device.type,
                        name_of(source.dtype),
                        name_of(dtype),
                        int(source.numel()),
                    )
                    marks.update(() if index is None else (index,))
            out = func(*args, **kwargs)
            if on[0]:
                remember(out)
                if marks:
                    for t in pytree.tree_leaves((out, written(func, args, kwargs))):
                        carry(t, marks)
                moved = packet is aten._to_copy and kwargs.get("device") is not None
                for t in pytree.tree_leaves(out):
                    if isinstance(t, torch.Tensor) and held and not moved:
                        hold(t, fresh=True)
                    elif isinstance(t, torch.Tensor):
                        hosts.pop(id(t), None)
                if not held:  # what the op wrote in place now holds other data
                    for t in pytree.tree_leaves(written(func, args, kwargs)):
                        if isinstance(t, torch.Tensor):
                            write_over(t)
            return out

    class CopyRecord(Dispatch):
        def results(self, value) -> list:
            """For a tensor the call returned, one entry ``["result", device, device, dtype,
            dtype, i]`` for each recorded copy ``i`` its data came from (through any ops); for
            a model it returned, the same for its parameters and buffers, each copy once."""
            if isinstance(value, torch.nn.Module):
                tensors = [*value.parameters(), *value.buffers()]
            else:
                tensors = [value] if isinstance(value, torch.Tensor) else []
            entries, seen = [], set()
            for t in tensors:
                device, dtype = t.device.type, name_of(t.dtype)
                for i in sorted(came_from(t) - seen):
                    seen.add(i)
                    entries.append(["result", device, device, dtype, dtype, i])
            return entries[: max(0, LIMIT - len(record))]

        def __enter__(self):
            _FORK_WATCHERS.append(forked)
            look.begin()
            self.saved = [(owner, n, owner.__dict__.get(n)) for owner, n, _ in wrapped]
            for owner, n, wrap in wrapped:
                setattr(owner, n, wrap(n, getattr(owner, n)))
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                deadline = time.monotonic() + 2
                futures = [f for f in started if isinstance(f, concurrent.futures.Future)]
                concurrent.futures.wait(futures, timeout=2)
                pool_worker = concurrent.futures.thread._worker  # waits for work: its futures tell
                for thread in [t for t in started if isinstance(t, threading.Thread)]:
                    if getattr(thread, "_target", None) is not pool_worker:
                        thread.join(max(0.0, deadline - time.monotonic()))
                return super().__exit__(*exc)
            finally:
                look.end()
                if look.theirs is not None:
                    # A profiler of the call's own that never ended (prepared, never
                    # exited): the look stood aside until the end, and cannot be sure.
                    look.theirs = None
                    look.missed += 1
                if forked in _FORK_WATCHERS:
                    _FORK_WATCHERS.remove(forked)
                missed = look.missed
                if missed:
                    del record[LIMIT - 1 :]
                    record.append([UNSEEN, "", "", "", "", missed])
                on[0] = False
                made.clear()
                hosts.clear()
                for owner, n, kept in self.saved:
                    if kept is None:
                        delattr(owner, n)  # it was inherited
                    else:
                        setattr(owner, n, kept)

    return CopyRecord()
