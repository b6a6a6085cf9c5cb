"""Runs in the student's kernel: answers the bridge's requests (``autograder.bridge.protocol``).

This is trusted code in an untrusted process. The student's notebook ran here first and
may have replaced any of it; that is fine, because everything this module can send is a
reply of plain data, which the test kernel decodes into values of its own. A replaced
``serve`` can only state answers, and stating the right answers means knowing them.
What must hold is the other direction: for an honest notebook, answering changes
nothing the notebook can see, and never raises.
"""

from __future__ import annotations

import builtins

from autograder.bridge import plaindata, protocol


def serve(shell, prompt: str) -> None:
    """Answer one request: publish the reply as a display_data of ``REPLY_MIME``."""
    try:
        request = protocol.request_body(prompt)
        if request.get("op") == "describe":
            reply = describe(shell.user_ns, request["names"])
        elif request.get("op") == "call":
            reply = call(shell.user_ns, request)
        else:
            reply = {"failed": "unknown request"}
        text = protocol.dumps(reply)
    except Exception as exc:  # noqa: BLE001 - the reply says what went wrong
        text = protocol.dumps({"unreadable": protocol.message_text(f"{type(exc).__name__}: {exc}")})
    from IPython.display import publish_display_data

    publish_display_data({protocol.REPLY_MIME: text})


def describe(namespace: dict, names: list[str]) -> dict:
    values = []
    for name in names:
        if name not in namespace:
            values.append([name, protocol.MISSING])
            continue
        value = namespace[name]
        try:
            values.append([name, plaindata.encode(value)])
        except plaindata.Unencodable as exc:
            if builtins.callable(value):
                values.append([name, protocol.FUNCTION])
            else:
                values.append([name, {"$": "unreadable", "why": protocol.message_text(exc)}])
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
        with _recording(record):
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
    return {"ok": data, **_after(args, kwargs), **({} if record is None else {"record": record})}


def _after(args: list, kwargs: dict) -> dict:
    """The state of each argument a call can change in place (None for the others)."""
    values = args + list(kwargs.values())
    try:
        after = plaindata.encode_values([v if plaindata.mutable(v) else None for v in values])
    except plaindata.Unencodable:
        after = [None] * len(values)
    return {
        "args": after[: len(args)],
        "kwargs": [[k, a] for k, a in zip(kwargs, after[len(args) :])],
    }


# -- a record of what crossed between devices ------------------------------------------------
MAX_RECORD = 1000  # copies kept in one record; a test needs the first few


def _recording(record):
    """A context that appends to ``record`` each copy the call makes from one device to
    another (``copy_record``), or does nothing when ``record`` is None."""
    import contextlib

    if record is None:
        return contextlib.nullcontext()
    return copy_record(record)


def copy_record(record: list):
    """A ``TorchDispatchMode`` that lets every operation run as it would, and appends to
    ``record`` one entry per copy between two devices: ``[op, from_device, to_device,
    from_dtype, to_dtype, numel]``, all plain strings and an int. The ops that copy a
    tensor's data elsewhere are ``aten._to_copy`` (``.to``, ``.cuda``) and ``aten.copy_``
    (``x.copy_(src)``, ``x[...] = src``); a tensor made on a device from data on the host
    (``torch.tensor``, ``torch.as_tensor``, ``torch.asarray``, which copy without an op that
    a dispatch mode sees) is a copy from the CPU, in the dtype the data was made there.
    Each value read on the host is ``[op, device, "host", dtype, dtype, numel]``: ``.item()``,
    ``float(t)``, an ``if`` on a tensor (``aten._local_scalar_dense``), and a tensor printed,
    formatted, or made a list or a NumPy array (``__repr__``, ``__format__``, ``tolist``,
    ``numpy``, ``__array__``, which read without dispatching). One read or copy is one
    entry, whatever it runs inside. A copy that also converts (``.to(device,
    torch.float32)``) is recorded with both dtypes: a blocking copy from the CPU converts
    there, before the link (PyTorch's ``Copy.cu``). The exercises' checks cell records the
    same way where there is no course-grade."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    inside: list[str] = []  # a read or a copy being recorded: what runs inside it is its own

    def note(*entry) -> None:
        if len(record) < MAX_RECORD:
            record.append([*entry])

    def name_of(dtype) -> str:
        return str(dtype).removeprefix("torch.")

    def host_read(name, method):
        def read(self, *args, **kwargs):
            if not inside:
                note(
                    name,
                    self.device.type,
                    "host",
                    name_of(self.dtype),
                    name_of(self.dtype),
                    int(self.numel()),
                )
            inside.append(name)
            try:
                return method(self, *args, **kwargs)
            finally:
                inside.pop()

        return read

    def made_from_data(name, factory):
        def make(data, *args, **kwargs):
            inside.append(name)
            try:
                out = factory(data, *args, **kwargs)
            finally:
                inside.pop()
            source = data.device.type if isinstance(data, torch.Tensor) else "cpu"
            if not inside and isinstance(out, torch.Tensor) and out.device.type != source:
                made = data.dtype if isinstance(data, torch.Tensor) else out.dtype
                note(
                    name,
                    source,
                    out.device.type,
                    name_of(made),
                    name_of(out.dtype),
                    int(out.numel()),
                )
            return out

        return make

    wrapped = [
        (torch.Tensor, n, host_read)
        for n in ("__repr__", "__format__", "tolist", "numpy", "__array__")
    ]
    wrapped += [(torch, n, made_from_data) for n in ("tensor", "as_tensor", "asarray")]

    class CopyRecord(TorchDispatchMode):
        def __enter__(self):
            self.saved = [(owner, n, owner.__dict__.get(n)) for owner, n, _ in wrapped]
            for owner, n, wrap in wrapped:
                setattr(owner, n, wrap(n, getattr(owner, n)))
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            finally:
                for owner, n, kept in self.saved:
                    if kept is None:
                        delattr(owner, n)  # it was inherited
                    else:
                        setattr(owner, n, kept)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            packet = func.overloadpacket
            if inside:
                return out
            if packet is aten._local_scalar_dense:  # .item(), float(t), an if on a tensor
                if isinstance(args[0], torch.Tensor):
                    dtype = name_of(args[0].dtype)
                    note(
                        packet.__name__,
                        args[0].device.type,
                        "host",
                        dtype,
                        dtype,
                        int(args[0].numel()),
                    )
                return out
            if packet is aten._to_copy:
                source, target = args[0], out
            elif packet is aten.copy_:
                source, target = args[1], args[0]
            else:
                return out
            if (
                isinstance(source, torch.Tensor)
                and isinstance(target, torch.Tensor)
                and source.device.type != target.device.type
            ):
                note(
                    packet.__name__,
                    source.device.type,
                    target.device.type,
                    name_of(source.dtype),
                    name_of(target.dtype),
                    int(source.numel()),
                )
            return out

    return CopyRecord()
