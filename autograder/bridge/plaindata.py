"""Values as plain data: the one format in which answers, arguments and results cross
between the student's kernel and the trusted test kernel.

``encode`` turns a value into JSON-ready data (numbers, strings, lists, dicts) and
``decode`` turns such data back into a value of the same kind, built afresh by the
decoding process. Nothing in the data can run code when decoded: no pickle, no eval,
no import of a name the data chooses. So whatever a student's kernel sends, the test
kernel gets only data, of base types, that compares honestly.

Kinds kept: None, bool, int, float (NaN and infinities included), complex, str, bytes,
``io.BytesIO``, list, tuple, dict with plain keys, slices, ``torch.Tensor`` (dtype,
device, shape, requires_grad, exact bytes), ``torch.dtype``, ``torch.device``,
``torch.Size``, NumPy arrays and scalars, and ``torch.nn.Module`` (the standard layers in
``MODULES`` rebuilt as themselves, any other module as a ``ForeignModule`` holding the
same parameters and buffers, without its forward). The arguments of one call are
encoded together (``encode_values``), so that an optimizer in ``OPTIMIZERS`` can cross
as one over the parameters of a model passed beside it, with its state. A subclass of any of these (a
``float`` whose ``__eq__`` lies, a tensor subclass) is kept as its base value: the lie
stays behind. Anything else is ``Unencodable``.

``ref`` (both ways) lets a caller replace chosen objects by references, so that a result
which *is* one of a call's arguments comes back as that very object.

What decoding promises the trusted side (the test kernel decodes what a student's kernel
sent, so every rule here is about hostile data):

- **Only complete data is decoded.** A tensor's or array's bytes are exactly its number
  of elements times its item size; only a ``meta`` tensor (which has no numbers) comes
  without bytes. Nothing is ever built with ``torch.empty`` on a device that has memory,
  so no byte the decoding process allocated earlier (a hidden test's text, another
  submission's data) can be handed back as if it were the student's.
- **Nothing is chosen by name.** Dtypes, devices, layers, optimizers and their state
  come from fixed tables of objects (``DTYPES``, ``DEVICE``, ``MODULES``,
  ``OPTIMIZERS``); no ``getattr`` on a module with a name from the data, so decoding
  never imports a module or runs a deprecation shim.
- **Cost has a bound.** One ``Budget`` per reply bounds the elements of each tensor,
  the bytes of all of them, the modules and tensors rebuilt, and the CPU seconds spent;
  a reply past any of them is refused with ``TooCostly``, which says which.
- **A test's own objects change only where it passed a model or an optimizer**
  (``update_in_place``), and then only in the values of the members they already have:
  the same names, shapes and dtypes; never a new member, never another kind.
"""

from __future__ import annotations

import base64
import io
import math
import re
import sys
import time

MAX_ELEMENTS = 1 << 22  # per tensor or array: 4 Mi numbers, 16 MB of float32
MAX_DEPTH = 20
MAX_ITEMS = 100_000  # per list, tuple or dict
MAX_BYTES = 64 * 1024 * 1024  # per bytes or BytesIO
# What one reply may cost the decoding process (see Budget).
MAX_REPLY_BYTES = 128 * 1024 * 1024  # tensors, arrays and bytes, in all
MAX_MODULES = 1_000  # modules rebuilt
MAX_TENSORS = 10_000  # tensors and arrays rebuilt
MAX_CPU_SECONDS = 10.0  # CPU time spent decoding
MAX_TEXT_CHARS = 4_000_000  # characters of all strings in one reply (no answer needs more)
MAX_SAME_HASH = 16  # keys of one dict that may share a hash (more: chosen to collide)
MAX_DIMS = 16


# Every kind this module writes; a dict with any other "$" is a caller's reference.
KINDS = {
    "int",
    "float",
    "complex",
    "bytes",
    "bytesio",
    "tuple",
    "dict",
    "slice",
    "size",
    "dtype",
    "device",
    "tensor",
    "ndarray",
    "npscalar",
    "module",
    "optimizer",
}
# Optimizers rebuilt as themselves, over the parameters of a model passed in the same call.
OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad")


class Unencodable(ValueError):
    """The value has no plain-data form (a student class, a generator, a huge tensor)."""


class TooCostly(ValueError):
    """Decoding this data would cost more than one reply may (``Budget``)."""


class Budget:
    """What one reply may still cost: checked as each piece is decoded, before it is
    built, so a reply past a bound costs only the work up to it."""

    def __init__(self):
        self.bytes, self.modules, self.tensors = MAX_REPLY_BYTES, MAX_MODULES, MAX_TENSORS
        self.text = MAX_TEXT_CHARS
        self.deadline = time.process_time() + MAX_CPU_SECONDS

    def spend(self, *, nbytes: int = 0, modules: int = 0, tensors: int = 0, text: int = 0) -> None:
        self.bytes -= nbytes
        self.modules -= modules
        self.tensors -= tensors
        self.text -= text
        if self.text < 0:
            # A test's message quotes an answer: text past this would make the trusted
            # kernel's own messages too large to pass to the grader.
            raise TooCostly(f"more than {MAX_TEXT_CHARS:,} characters of text in one answer")
        if self.bytes < 0:
            raise TooCostly(f"more than {MAX_REPLY_BYTES // 2**20} MB of numbers in one answer")
        if self.modules < 0:
            raise TooCostly(f"more than {MAX_MODULES} modules in one answer")
        if self.tensors < 0:
            raise TooCostly(f"more than {MAX_TENSORS} tensors in one answer")
        if time.process_time() > self.deadline:
            raise TooCostly(
                f"more than {MAX_CPU_SECONDS:g} s of the grader's CPU to read one answer"
            )


MAX_INT_BITS = 1_328  # at most 400 digits, what a decode reads: far inside str()'s own limit


def encode(value, ref=None, _depth=0):
    """Plain data for ``value``. ``ref(value)``, when given, is asked first: data it
    returns (a reference) stands for the object."""
    if _depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if ref is not None and kind not in (int, float):
        named = ref(value)
        if named is not None:
            return named
    if kind is int:
        if abs(value) < 2**53:
            return value
        if value.bit_length() > MAX_INT_BITS:  # str() itself refuses past 4,300 digits
            raise Unencodable(f"an int of {value.bit_length():,} bits")
        return {"$": "int", "v": str(value)}
    if kind is float:
        return _float(value)
    # Exact types first: the subclass tests below go through the base type's own
    # methods, so an overridden __float__ or __eq__ is never consulted.
    if isinstance(value, int):
        return encode(int.__int__(value), ref, _depth)
    if isinstance(value, float):
        return _float(float.__float__(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        c = complex.__complex__(value)
        return {"$": "complex", "re": _float(c.real), "im": _float(c.imag)}
    if isinstance(value, (bytes, bytearray)):
        return {"$": "bytes", "v": _b64(bytes(value))}
    if isinstance(value, io.BytesIO):
        return {
            "$": "bytesio",
            "v": _b64(io.BytesIO.getvalue(value)),
            "pos": io.BytesIO.tell(value),
        }
    if isinstance(value, (list, tuple)):
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        seq = [encode(v, ref, _depth + 1) for v in _bounded(items, len(value))]
        torch = _torch()
        if torch is not None and isinstance(value, torch.Size):
            return {"$": "size", "v": seq}
        return seq if isinstance(value, list) else {"$": "tuple", "v": seq}
    if isinstance(value, dict):
        pairs = [
            [encode(k, ref, _depth + 1), encode(v, ref, _depth + 1)]
            for k, v in _bounded(dict.items(value), len(value))
        ]
        return {"$": "dict", "v": pairs}
    if isinstance(value, slice):
        return {
            "$": "slice",
            "v": [encode(x, ref, _depth + 1) for x in (value.start, value.stop, value.step)],
        }
    torch = _torch()
    if torch is not None:
        if isinstance(value, torch.Tensor):
            return _tensor(value, torch)
        if isinstance(value, torch.dtype):
            return {"$": "dtype", "v": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {
                "$": "device",
                "v": f"{value.type}" + ("" if value.index is None else f":{value.index}"),
            }
        if isinstance(value, torch.nn.Module):
            return _module(value, torch, ref, _depth)
    np = _numpy()
    if np is not None:
        if isinstance(value, np.ndarray):
            return _ndarray(value, np)
        if isinstance(value, np.generic):
            return {"$": "npscalar", "v": _ndarray(np.asarray(value), np)}
    raise Unencodable(f"a {kind.__module__}.{kind.__qualname__} has no plain-data form")


def decode(data, ref=None, budget: Budget | None = None):
    """The value that ``data`` describes; ``ref(data)`` resolves the references that
    ``encode``'s ``ref`` made (any dict whose "$" is not a kind of this module).
    ``budget``: what the whole reply may still cost (a new one when not given)."""
    return _decode(data, ref, budget or Budget(), 0)


def _decode(data, ref, budget: Budget, depth: int):
    if type(data) is str:
        budget.spend(text=len(data))
        return data
    if data is None or type(data) in (bool, int, float):
        return data
    if depth > MAX_DEPTH * 2:
        raise ValueError("nested too deeply")
    if type(data) is list:
        budget.spend()
        return [_decode(v, ref, budget, depth + 1) for v in data]
    if type(data) is not dict:
        raise ValueError(f"not plain data: {type(data).__name__}")
    tag = data.get("$")
    if tag == "int":
        return int(_text(data["v"], 400))
    if tag == "float":
        return float(_text(data["v"], 40))
    if tag == "complex":
        return complex(
            _number(_decode(data["re"], None, budget, depth + 1)),
            _number(_decode(data["im"], None, budget, depth + 1)),
        )
    if tag == "bytes":
        return _unb64(data["v"], budget)
    if tag == "bytesio":
        buffer = io.BytesIO(_unb64(data["v"], budget))
        buffer.seek(max(0, min(int(data.get("pos", 0)), len(buffer.getvalue()))))
        return buffer
    if tag == "tuple":
        return tuple(_decode(v, ref, budget, depth + 1) for v in _list(data["v"]))
    if tag == "dict":
        pairs = _pairs(data["v"])
        keys = [_hashable(_decode(k, ref, budget, depth + 1)) for k, _ in pairs]
        _no_chosen_collisions(keys)
        budget.spend()
        return {key: _decode(v, ref, budget, depth + 1) for key, (_, v) in zip(keys, pairs)}
    if tag == "slice":
        return slice(*(_decode(v, None, budget, depth + 1) for v in _list(data["v"])[:3]))
    if tag == "size":
        import torch

        return torch.Size([_dim(v) for v in _list(data["v"])[:MAX_DIMS]])
    if tag == "dtype":
        return _dtype(data["v"])
    if tag == "device":
        return _device(data["v"])
    if tag == "tensor":
        return _decode_tensor(data, budget)
    if tag == "ndarray":
        return _decode_ndarray(data, budget)
    if tag == "npscalar":
        return _decode_ndarray(data["v"], budget)[()]
    if tag == "module":
        return _decode_module(data, 0, budget)
    if ref is not None and tag not in KINDS:
        return ref(data)
    raise ValueError(f"unknown plain-data tag {str(tag)[:40]!r}")


def _no_chosen_collisions(keys: list) -> None:
    """Refuse keys that share one hash (ints and tuples hash the same in every process, so
    a student can choose thousands that collide, and building the dict would then take
    minutes): checked before the dict is built."""
    if len(keys) <= MAX_SAME_HASH:
        return
    try:
        hashes = sorted(hash(key) for key in keys)
    except TypeError:
        raise ValueError("a dict key that cannot be a key") from None
    run = 1
    for before, after in zip(hashes, hashes[1:]):
        run = run + 1 if after == before else 1
        if run > MAX_SAME_HASH:
            raise TooCostly("a dict whose keys were chosen to share one hash")


def _text(value, limit: int) -> str:
    if type(value) is not str or len(value) > limit:
        raise ValueError("not a number's text")
    return value


def _number(value):
    if type(value) not in (int, float):
        raise ValueError("not a number")
    return value


def _list(value) -> list:
    if type(value) is not list:
        raise ValueError("not a list")
    return value


def _pairs(value) -> list:
    pairs = _list(value)
    if not all(type(p) is list and len(p) == 2 for p in pairs):
        raise ValueError("not a list of pairs")
    return pairs


def _dim(value) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a tensor dimension: {str(value)[:20]}")
    if value > MAX_ELEMENTS:
        raise TooCostly(f"a tensor of more than {MAX_ELEMENTS} numbers")
    return value


def _float(x: float):
    # JSON has no NaN or infinity; keep them exactly, and keep -0.0 apart from 0.0.
    if math.isfinite(x) and not (x == 0.0 and math.copysign(1.0, x) < 0):
        return x
    return {"$": "float", "v": repr(x)}


def _bounded(items, n):
    if n > MAX_ITEMS:
        raise Unencodable(f"{n} items is more than {MAX_ITEMS}")
    return items


def _tensor(t, torch):
    # A subclass's __torch_function__ and properties stay behind: a plain tensor on the
    # same storage is what gets read.
    requires_grad = bool(torch._C.TensorBase.requires_grad.__get__(t))
    with torch._C.DisableTorchFunctionSubclass():
        t = torch.Tensor.as_subclass(torch.Tensor.detach(t), torch.Tensor)
    if t.layout != torch.strided:
        raise Unencodable(f"a {t.layout} tensor has no plain-data form")
    n = t.numel()
    if n > MAX_ELEMENTS:
        raise Unencodable(f"a tensor of {n} numbers is more than {MAX_ELEMENTS}")
    device = str(t.device)
    dtype = str(t.dtype).removeprefix("torch.")
    if dtype not in DTYPE_NAMES:
        raise Unencodable(f"a {dtype} tensor has no plain-data form")
    data = {
        "$": "tensor",
        "dtype": dtype,
        "device": device,
        "shape": list(t.shape),
        "requires_grad": requires_grad,
    }
    if t.device.type == "meta":
        return data  # a meta tensor has a shape and a dtype, but no numbers
    flat = t.cpu().contiguous().reshape(-1)
    if t.is_conj():
        flat = flat.resolve_conj()
    raw = flat.view(torch.uint8).numpy().tobytes() if n else b""
    data["bytes"] = base64.b64encode(raw).decode()
    return data


def _decode_tensor(data, budget: Budget | None = None):
    """A tensor built from its exact bytes (or, on meta, from its shape alone)."""
    import torch

    budget = budget or Budget()
    budget.spend(tensors=1)
    dtype = _dtype(data.get("dtype"))
    shape = _shape(data.get("shape"))
    device = _device(data.get("device"))
    n = math.prod(shape)
    if device.type == "meta":
        if "bytes" in data:
            raise ValueError("a meta tensor has no numbers")
        t = torch.empty(shape, dtype=dtype, device=device)  # meta: no memory, nothing to read
    else:
        if "bytes" not in data:
            raise ValueError("a tensor came without its numbers (only a meta tensor may)")
        size = n * dtype.itemsize
        budget.spend(nbytes=size)
        raw = bytearray(_unb64(data["bytes"], budget, exact=size))
        t = (
            torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape).clone()
            if n
            else torch.zeros(shape, dtype=dtype)
        )
        if device.type != "cpu":
            t = t.to(device)
    if data.get("requires_grad") is True and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


def _shape(value) -> list[int]:
    shape = [_dim(s) for s in _list(value)]
    if len(shape) > MAX_DIMS or math.prod(shape) > MAX_ELEMENTS:
        raise TooCostly(f"a tensor of more than {MAX_ELEMENTS} numbers or {MAX_DIMS} dimensions")
    return shape


def _ndarray(a, np):
    a = np.ndarray.view(a, np.ndarray)  # a subclass's methods stay behind
    if a.dtype.kind not in "biufc":
        raise Unencodable(f"a NumPy array of {a.dtype} has no plain-data form")
    if a.size > MAX_ELEMENTS:
        raise Unencodable(f"an array of {a.size} numbers is more than {MAX_ELEMENTS}")
    return {
        "$": "ndarray",
        "dtype": a.dtype.newbyteorder("<").str,
        "shape": list(a.shape),
        "bytes": base64.b64encode(
            np.ascontiguousarray(a, a.dtype.newbyteorder("<")).tobytes()
        ).decode(),
    }


def _decode_ndarray(data, budget: Budget | None = None):
    import numpy as np

    budget = budget or Budget()
    budget.spend(tensors=1)
    if type(data) is not dict:
        raise ValueError("not an array")
    name = NUMPY_DTYPES.get(str(data.get("dtype")))
    if name is None:
        raise ValueError(f"not a numeric dtype: {str(data.get('dtype'))[:20]!r}")
    dtype = np.dtype(name)
    shape = _shape(data.get("shape"))
    size = math.prod(shape) * dtype.itemsize
    budget.spend(nbytes=size)
    raw = _unb64(data.get("bytes"), budget, exact=size)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


# The dtypes a tensor may cross in, as torch names them (``str(dtype)`` without
# "torch."); looked up by name in this table only, never with getattr on torch.
DTYPE_NAMES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
)
_DTYPES: dict = {}
# NumPy dtypes, as ``_ndarray`` writes them (little-endian ``dtype.str``).
NUMPY_DTYPES = {
    s: s
    for s in (
        "|b1",
        "|u1",
        "|i1",
        "<u2",
        "<i2",
        "<u4",
        "<i4",
        "<u8",
        "<i8",
        "<f2",
        "<f4",
        "<f8",
        "<c8",
        "<c16",
    )
}
DEVICE = re.compile(r"(cpu|meta|cuda)(:[0-9]{1,2})?")


def _dtype(name):
    if not _DTYPES:
        import torch

        _DTYPES.update({n: getattr(torch, n) for n in DTYPE_NAMES})  # our names, not the data's
    dtype = _DTYPES.get(name) if type(name) is str else None
    if dtype is None:
        raise ValueError(f"not a dtype the grader reads: {str(name)[:40]!r}")
    return dtype


def _device(name):
    import torch

    if (
        type(name) is not str
        or not DEVICE.fullmatch(name)
        or (":" in name and name.startswith(("cpu", "meta")))
    ):
        raise ValueError(f"not a device the grader reads: {str(name)[:40]!r}")
    return torch.device(name)


def _b64(raw: bytes) -> str:
    if len(raw) > MAX_BYTES:
        raise Unencodable(f"{len(raw)} bytes is more than {MAX_BYTES}")
    return base64.b64encode(raw).decode()


def _unb64(text, budget: Budget | None = None, exact: int | None = None) -> bytes:
    """The bytes ``text`` holds in base64, refused unless exactly ``exact`` of them (when
    given): checked on the text's length before anything is decoded."""
    if type(text) is not str or len(text) > (MAX_BYTES * 4) // 3 + 4:
        raise ValueError("not base64 text within the size limit")
    if exact is not None and len(text) != 4 * math.ceil(exact / 3):
        raise ValueError(f"a tensor's bytes must be exactly {exact}: the data is incomplete")
    raw = base64.b64decode(text, validate=True)
    if exact is not None and len(raw) != exact:
        raise ValueError(f"a tensor's bytes must be exactly {exact}: the data is incomplete")
    if exact is None and budget is not None:
        budget.spend(nbytes=len(raw))
    return raw


# -- modules ---------------------------------------------------------------------------
_CONV = (
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "groups",
    "padding_mode",
    "bias",
)
_NORM = ("num_features", "eps", "momentum", "affine", "track_running_stats")
_POOL = ("kernel_size", "stride", "padding")
# The standard layers rebuilt as themselves, and the only constructor arguments each is
# built with (a fixed table: a reply's other names, deprecated ones included, are refused).
# ``bias`` is whether the layer has one. Those with parameters are built on the meta
# device and then given the sent tensors.
MODULES: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    "Conv1d": _CONV,
    "Conv2d": _CONV,
    "BatchNorm1d": _NORM,
    "BatchNorm2d": _NORM,
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "Embedding": ("num_embeddings", "embedding_dim", "padding_idx"),
    "Dropout": ("p",),
    "Flatten": ("start_dim", "end_dim"),
    "Softmax": ("dim",),
    "LogSoftmax": ("dim",),
    "MaxPool2d": _POOL,
    "AvgPool2d": _POOL,
    "ReLU": (),
    "GELU": (),
    "Tanh": (),
    "Sigmoid": (),
    "Identity": (),
    "Sequential": (),
    "ModuleList": (),
    "CrossEntropyLoss": ("reduction", "ignore_index", "label_smoothing"),
    "NLLLoss": ("reduction", "ignore_index"),
    "MSELoss": ("reduction",),
    "L1Loss": ("reduction",),
    "BCEWithLogitsLoss": ("reduction",),
}


def _arguments(m, kind: str) -> dict:
    return {n: (m.bias is not None) if n == "bias" else getattr(m, n) for n in MODULES[kind]}


def _argument(value, depth: int = 0):
    """A constructor argument as plain data allows it: a number, a bool, a short string,
    None, or a short tuple of those (a kernel size)."""
    if value is None or type(value) in (bool, int, float):
        return value
    if type(value) is str and len(value) <= 40:
        return value
    if type(value) in (tuple, list) and len(value) <= 8 and depth == 0:
        return tuple(_argument(v, 1) for v in value)
    raise ValueError("a layer's arguments are numbers, flags, short words or short tuples")


_ON_META = {"Linear", "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding"}


def _module(m, torch, ref, depth):
    if depth > MAX_DEPTH:
        raise Unencodable("modules nested too deeply")
    kind = type(m)
    standard = kind.__module__.startswith("torch.nn.modules") and kind.__name__ in MODULES
    data = {
        "$": "module",
        "class": f"{kind.__module__}.{kind.__qualname__}",
        "type": kind.__name__ if standard else None,
        "training": bool(torch.nn.Module.__getattribute__(m, "training")),
    }
    if standard:
        data["init"] = encode(_arguments(m, kind.__name__), None, depth + 1)
    get = torch.nn.Module.__getattribute__
    data["params"] = [
        [
            str(name),
            None
            if p is None
            else {
                "t": _tensor(p, torch),
                "grad": None if p.grad is None else _tensor(p.grad, torch),
            },
        ]
        for name, p in _bounded(dict.items(get(m, "_parameters")), MAX_ITEMS)
    ]
    data["buffers"] = [
        [str(name), None if b is None else _tensor(b, torch)]
        for name, b in _bounded(dict.items(get(m, "_buffers")), MAX_ITEMS)
    ]
    data["children"] = [
        [str(name), _module(child, torch, ref, depth + 1)]
        for name, child in _bounded(dict.items(get(m, "_modules")), MAX_ITEMS)
        if child is not None
    ]
    return data


def _foreign_module_class():
    import torch

    class ForeignModule(torch.nn.Module):
        """A module the grader cannot rebuild (a class of the student's own): its
        parameters, buffers and children, without its forward."""

        def __init__(self, class_name: str):
            super().__init__()
            self.class_name = class_name

        def extra_repr(self) -> str:
            return f"was {self.class_name}"

    return ForeignModule


_CLASSES: dict = {}


def _classes() -> dict:
    """The fixed tables as objects: each standard layer and optimizer by its name in
    ``MODULES`` and ``OPTIMIZERS`` (names of ours, never of the data)."""
    if not _CLASSES:
        import torch

        _CLASSES.update({("module", n): getattr(torch.nn, n) for n in MODULES})
        _CLASSES.update({("optimizer", n): getattr(torch.optim, n) for n in OPTIMIZERS})
    return _CLASSES


def _module_class(kind):
    """The standard layer named ``kind``, else None."""
    return _classes().get(("module", kind)) if type(kind) is str else None


def _decode_module(data, depth: int, budget: Budget | None = None):
    import torch

    budget = budget or Budget()
    if depth > MAX_DEPTH:
        raise ValueError("modules nested too deeply")
    budget.spend(modules=1)
    kind = data.get("type")
    if kind is not None:
        cls = _module_class(kind)
        if cls is None:
            raise ValueError(f"not a standard module: {str(kind)[:40]!r}")
        init = _decode(data.get("init") or {"$": "dict", "v": []}, None, budget, depth + 1)
        if type(init) is not dict or not all(type(k) is str for k in init):
            raise ValueError("a module's arguments must be named")
        unknown = sorted(set(init) - set(MODULES[kind]))
        if unknown:
            raise ValueError(f"{kind} is not built with {', '.join(unknown)[:80]}")
        init = {name: _argument(value) for name, value in init.items()}
        if kind in _ON_META:
            init["device"] = "meta"
        m = cls(**init)
    else:
        m = _foreign_module_class()(str(data.get("class", "a module"))[:200])
    _load_state(m, data, depth, torch, budget)
    return m


def _load_state(m, data, depth: int, torch, budget: Budget) -> None:
    """Give a module this process just built the parameters, buffers, children and mode
    that ``data`` holds (a new object: no test holds it yet)."""
    for name, p in _pairs(data.get("params", [])):
        name = _member_name(name)
        if p is None:
            m._parameters[name] = None
            continue
        tensor = _decode_tensor(p["t"], budget)
        param = torch.nn.Parameter(tensor.detach(), requires_grad=tensor.requires_grad)
        param.grad = None if p.get("grad") is None else _decode_tensor(p["grad"], budget)
        m._parameters[name] = param
    for name, b in _pairs(data.get("buffers", [])):
        m._buffers[_member_name(name)] = None if b is None else _decode_tensor(b, budget)
    for name, child in _pairs(data.get("children", [])):
        m._modules[_member_name(name)] = _decode_module(child, depth + 1, budget)
    torch.nn.Module.train(m, bool(data.get("training", True)))


def _member_name(name) -> str:
    if type(name) is not str or not name or "." in name or len(name) > 200:
        raise ValueError(f"not a member name: {str(name)[:40]!r}")
    return name


# -- writing a call's effects back --------------------------------------------------------
def in_place(value) -> bool:
    """Whether a test's argument takes the changes a student's function made to it: a
    model (trained, loaded) or an optimizer (its state after a step). Every other
    argument crosses by value: the test's own object never changes."""
    torch = _torch()
    return torch is not None and isinstance(value, (torch.nn.Module, torch.optim.Optimizer))


def update_in_place(target, data, budget: Budget | None = None) -> None:
    """Make ``target``, a model or an optimizer a test passed, what ``data`` says it
    became. Only the values of members it already has may change: the same names, shapes
    and dtypes (a parameter's device may change, as ``load_state_dict(assign=True)``
    would); a new member, a missing one or another kind is refused, and ``target`` is
    left as it was."""
    update_all_in_place([(target, data)], budget)


def update_all_in_place(pairs: list, budget: Budget | None = None) -> None:
    """``update_in_place`` for each ``(target, data)`` of one reply, all or none.

    PyTorch refuses some changes only as they are made (a parameter's data swapped for a
    tensor of another kind, such as one on meta), and a reply may be refused for one
    argument (an optimizer's state) after another (the model it steps) took its changes:
    whatever was changed is then put back, so a refused reply leaves nothing half-updated."""
    import copy

    import torch

    budget = budget or Budget()
    kept: list = []
    try:
        for target, data in pairs:
            if isinstance(target, torch.nn.Module):
                kept.append((target, _module_state(target)))
            elif isinstance(target, torch.optim.Optimizer):
                kept.append((target, copy.deepcopy(target.state_dict())))
            _update_one(target, data, budget, torch)
    except Exception:
        for target, state in reversed(kept):
            if isinstance(target, torch.nn.Module):
                _restore_module_state(state, torch)
            else:
                target.load_state_dict(state)
        raise


def _update_one(target, data, budget: Budget, torch) -> None:
    if isinstance(target, torch.nn.Module):
        if type(data) is not dict or data.get("$") != "module":
            raise ValueError("the model came back as something else")
        changes: list = []
        _plan_update(target, data, "", changes, budget, torch)
        for apply in changes:
            apply()
        return
    if isinstance(target, torch.optim.Optimizer):
        if type(data) is not dict or data.get("$") != "optimizer":
            raise ValueError("the optimizer came back as something else")
        _load_optimizer_state(target, data, budget)  # its parameters are the models' own
        return
    raise ValueError(f"a {type(target).__name__} crosses by value, not in place")


def _plan_update(m, data, where: str, changes: list, budget: Budget, torch) -> None:
    """Check ``data`` against module ``m`` and list the changes to make; nothing is
    changed until all of the model has been checked."""
    budget.spend(modules=1)
    kind = data.get("type")
    standard = _module_class(type(m).__name__) is type(m)
    if (kind is None and standard) or (
        kind is not None and (not standard or kind != type(m).__name__)
    ):
        raise ValueError(f"the model's {where or 'top'} module came back as another kind")
    params = {_member_name(n): p for n, p in _pairs(data.get("params", []))}
    buffers = {_member_name(n): b for n, b in _pairs(data.get("buffers", []))}
    children = {_member_name(n): c for n, c in _pairs(data.get("children", []))}
    own_children = {n: c for n, c in m._modules.items() if c is not None}
    for kind, sent, own in (
        ("parameters", params, m._parameters),
        ("buffers", buffers, m._buffers),
        ("modules", children, own_children),
    ):
        if set(sent) != set(own):
            added, gone = sorted(set(sent) - set(own)), sorted(set(own) - set(sent))
            raise ValueError(
                f"the model's {kind} changed{' at ' + where if where else ''}: "
                f"added {added[:3]}, removed {gone[:3]}"
            )
    for name, p in params.items():
        param = m._parameters[name]
        if (p is None) != (param is None):
            raise ValueError(f"the model's parameter {where}{name} was added or removed")
        if p is None:
            continue
        tensor = _same_form(_decode_tensor(p["t"], budget), param, where + name)
        grad = (
            None
            if p.get("grad") is None
            else _same_form(_decode_tensor(p["grad"], budget), param, where + name + ".grad")
        )
        if grad is not None and (grad.device != tensor.device or grad.requires_grad):
            # Checked now: PyTorch would refuse it while the changes are made, with some
            # of the model already changed.
            raise ValueError(
                f"the model's {where}{name}.grad came back on {grad.device.type}, not with "
                f"its parameter on {tensor.device.type}, or requiring a gradient itself"
            )
        changes.append(
            lambda param=param, tensor=tensor, grad=grad, m=m, name=name: _set_parameter(
                m, name, param, tensor, grad, torch
            )
        )
    for name, b in buffers.items():
        buffer = m._buffers[name]
        if (b is None) != (buffer is None):
            raise ValueError(f"the model's buffer {where}{name} was added or removed")
        if b is not None:
            tensor = _same_form(_decode_tensor(b, budget), buffer, where + name)
            changes.append(
                lambda m=m, name=name, tensor=tensor: m._buffers.__setitem__(name, tensor)
            )
    for name, child in children.items():
        _plan_update(own_children[name], child, f"{where}{name}.", changes, budget, torch)
    training = bool(data.get("training", True))
    changes.append(lambda: torch.nn.Module.train(m, training) and None)


def _module_state(model) -> list:
    """Everything update_in_place may change in ``model``, to put back."""
    kept = []
    for m in model.modules():
        kept.append((m, "training", m.training))
        for param in m._parameters.values():
            if param is not None:
                kept.append((param, "param", (param.data, param.requires_grad, param.grad)))
        kept.extend((m, "buffer", (name, b)) for name, b in m._buffers.items())
    return kept


def _restore_module_state(kept: list, torch) -> None:
    for owner, what, value in kept:
        if what == "training":
            owner.training = value
        elif what == "param":
            data, requires_grad, grad = value
            with torch.no_grad():
                owner.data = data
            owner.requires_grad_(requires_grad)
            owner.grad = grad
        else:
            owner._buffers[value[0]] = value[1]


def _same_form(tensor, like, what: str):
    if tuple(tensor.shape) != tuple(like.shape) or tensor.dtype != like.dtype:
        raise ValueError(
            f"the model's {what} came back as {tuple(tensor.shape)} {tensor.dtype}, "
            f"not {tuple(like.shape)} {like.dtype}"
        )
    return tensor


def _set_parameter(m, name: str, param, tensor, grad, torch) -> None:
    # The same Parameter object (an optimizer of the test's holds it), new data.
    with torch.no_grad():
        param.data = tensor.detach()
    param.requires_grad_(tensor.requires_grad)
    param.grad = grad


def mutable(value) -> bool:
    """Whether a call could change ``value`` in place (so its state is sent back)."""
    if isinstance(value, (list, dict, bytearray, io.BytesIO)):
        return True
    torch, np = _torch(), _numpy()
    if torch is not None and isinstance(
        value, (torch.Tensor, torch.nn.Module, torch.optim.Optimizer)
    ):
        return True
    return np is not None and isinstance(value, np.ndarray)


# -- the values of one call, together -------------------------------------------------------
def encode_values(values: list) -> list:
    """Encode a call's values (arguments, then keyword arguments) as one list, in which
    an optimizer names its parameters by the model that holds them (its place and the
    parameter's name)."""
    torch = _torch()
    params: dict[int, list] = {}
    for place, value in enumerate(values):
        if torch is not None and isinstance(value, torch.nn.Module):
            for name, param in torch.nn.Module.named_parameters(value):
                params.setdefault(id(param), [place, name])

    def optimizer(value):
        if torch is not None and isinstance(value, torch.optim.Optimizer):
            return _optimizer(value, params, torch)
        return None

    return [encode(v, ref=optimizer) for v in values]


def decode_values(datas: list) -> list:
    """The values ``encode_values`` describes: models first, then the optimizers over them."""
    if type(datas) is not list:
        raise ValueError("a call's values must be a list")
    budget = Budget()
    values: list = [None] * len(datas)
    later = []
    for place, data in enumerate(datas):
        if type(data) is dict and data.get("$") == "optimizer":
            later.append(place)
        else:
            values[place] = decode(data, budget=budget)
    for place in later:
        values[place] = _decode_optimizer(datas[place], values, budget)
    return values


def _optimizer(opt, params: dict, torch):
    kind = type(opt).__name__
    if kind not in OPTIMIZERS or type(opt).__module__.split(".")[:2] != ["torch", "optim"]:
        raise Unencodable(f"a {kind} optimizer has no plain-data form")
    state = torch.optim.Optimizer.state_dict(opt)
    groups = []
    for group, described in zip(opt.param_groups, state["param_groups"]):
        refs = []
        for param in group["params"]:
            if id(param) not in params:
                raise Unencodable("an optimizer over parameters of no model passed with it")
            refs.append(params[id(param)])
        settings = {k: v for k, v in described.items() if k != "params"}
        groups.append({"params": refs, "settings": encode(settings)})
    return {
        "$": "optimizer",
        "type": kind,
        "groups": groups,
        "state": encode(state["state"]),
        "defaults": encode(dict(opt.defaults)),
    }


# What each optimizer keeps per parameter (torch.optim's own names): the only state that
# may cross, each a tensor of the parameter's shape, or a one-number step count.
OPTIMIZER_STATE = {
    "SGD": {"momentum_buffer"},
    "Adam": {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    "AdamW": {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
    "RMSprop": {"step", "square_avg", "momentum_buffer", "grad_avg"},
    "Adagrad": {"step", "sum"},
}


def _optimizer_class(kind):
    cls = _classes().get(("optimizer", kind)) if type(kind) is str else None
    if cls is None:
        raise ValueError(f"not an optimizer the grader rebuilds: {str(kind)[:40]!r}")
    return cls


def _decode_optimizer(data, values: list, budget: Budget | None = None):
    import torch

    budget = budget or Budget()
    cls = _optimizer_class(data.get("type"))
    groups = []
    for group in _list(data.get("groups", [])):
        params = []
        for ref in _list(group["params"]):
            place, name = _list(ref)
            model = values[int(place)] if type(place) is int and 0 <= place < len(values) else None
            if not isinstance(model, torch.nn.Module):
                raise ValueError("an optimizer's parameters must belong to a model in the call")
            params.append(model.get_parameter(_text(name, 1000)))
        settings = decode(group["settings"], budget=budget)
        if type(settings) is not dict or not all(type(k) is str for k in settings):
            raise ValueError("an optimizer's settings must be named")
        groups.append({**settings, "params": params})
    opt = cls(groups, **_constructor_defaults(cls, data.get("defaults"), budget))
    _load_optimizer_state(opt, data, budget)
    return opt


def _constructor_defaults(cls, data, budget: Budget) -> dict:
    """The optimizer's own defaults (``optimizer.defaults``, what it was constructed with),
    as keyword arguments its constructor takes; each group also carries its settings."""
    import inspect

    if data is None:
        return {}
    defaults = decode(data, budget=budget)
    if type(defaults) is not dict:
        raise ValueError("an optimizer's defaults must be a mapping")
    accepted = inspect.signature(cls).parameters
    return {k: v for k, v in defaults.items() if type(k) is str and k in accepted and k != "params"}


def _load_optimizer_state(opt, data, budget: Budget | None = None) -> None:
    """Give ``opt`` the per-parameter state ``data`` holds, checked against its own
    parameters: known names only, each tensor of its parameter's shape and dtype (or a
    one-number step). Its groups and settings stay its own."""
    import torch

    budget = budget or Budget()
    kind = type(opt).__name__
    params = [p for group in opt.param_groups for p in group["params"]]
    described = torch.optim.Optimizer.state_dict(opt)["param_groups"]
    state = decode(data.get("state", {"$": "dict", "v": []}), budget=budget)
    if type(state) is not dict:
        raise ValueError("an optimizer's state must be a mapping")
    allowed = OPTIMIZER_STATE.get(kind, set())
    for index, entry in state.items():
        if type(index) is not int or not 0 <= index < len(params) or type(entry) is not dict:
            raise ValueError("an optimizer's state must be per parameter of its own")
        for key, value in entry.items():
            if key not in allowed:
                raise ValueError(f"{kind} keeps no state named {str(key)[:40]!r}")
            if value is None or type(value) in (int, float):
                continue
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                raise ValueError(f"{kind}'s {key} must be a floating-point tensor")
            shapes = {tuple(params[index].shape)} | ({()} if key == "step" else set())
            if tuple(value.shape) not in shapes:
                raise ValueError(
                    f"{kind}'s {key} has the shape {tuple(value.shape)}, "
                    f"not its parameter's {tuple(params[index].shape)}"
                )
    opt.load_state_dict({"state": state, "param_groups": described})


def _hashable(key):
    return tuple(key) if type(key) is list else key


def _torch():
    # Encoding never imports torch or NumPy into a kernel that did not; a value of
    # theirs can exist only where they are imported. Decoding imports what it needs.
    return sys.modules.get("torch")


def _numpy():
    return sys.modules.get("numpy")
