"""Answers as plain data: what crosses from a student's kernel into the clean room.

``encode`` turns a value into JSON-ready data (numbers, strings, lists, dicts) and
``decode`` turns such data back into a value of the same kind. Nothing in the data can
run code when decoded: there is no pickle, no eval and no import of a name the data
chooses, so a lying object in the student's kernel can only ever become data, and data
compares honestly in a kernel that never ran student code.

Kinds kept: None, bool, int, float (NaN and infinities included), complex, str, bytes,
list, tuple, dict with plain keys, slices, ``torch.Tensor`` (dtype, device, shape,
exact bytes), ``torch.dtype``, ``torch.device``, ``torch.Size``, NumPy arrays and
scalars. A subclass of any of these (a ``float`` whose ``__eq__`` lies, a tensor
subclass) is kept as its base value: the lie stays behind. Anything else is
``Unencodable``.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import sys

# Bound when the kernel starts, before student code: a notebook that rebinds
# builtins.isinstance (or type, len...) changes nothing here.
from builtins import (abs, bool, bytes, callable, dict, float, getattr, hasattr, id,  # noqa: E402,A004
                      int, isinstance, len, list, repr, sorted, str, tuple, type)

MAX_ELEMENTS = 1 << 22  # per tensor or array: 4 Mi numbers, 16 MB of float32
MAX_DEPTH = 20
MAX_ITEMS = 100_000  # per list, tuple or dict


class Unencodable(ValueError):
    """The value has no plain-data form (a student class, a generator, a huge tensor)."""


def encode(value, refs=None, _depth=0):
    """Plain data for ``value``; ``refs(value)`` may name objects this module cannot encode.

    ``refs`` lets the recorder encode functions and modules as references
    ({"$": "ref", ...}); without it they are Unencodable.
    """
    if _depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if abs(value) < 2**53 else {"$": "int", "v": str(value)}
    if kind is float:
        return _float(value)
    # Exact types first: the subclass tests below go through the base type's own
    # methods, so an overridden __float__ or __eq__ is never consulted.
    if isinstance(value, int):
        return encode(int.__int__(value), refs, _depth)
    if isinstance(value, float):
        return _float(float.__float__(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        c = complex.__complex__(value)
        return {"$": "complex", "re": _float(c.real), "im": _float(c.imag)}
    if isinstance(value, (bytes, bytearray)):
        return {"$": "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, (list, tuple)):
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        seq = [encode(v, refs, _depth + 1) for v in _bounded(items, len(value))]
        torch = _torch()
        if torch is not None and isinstance(value, torch.Size):
            return {"$": "size", "v": seq}
        return seq if isinstance(value, list) else {"$": "tuple", "v": seq}
    if isinstance(value, dict):
        pairs = [[encode(k, refs, _depth + 1), encode(v, refs, _depth + 1)]
                 for k, v in _bounded(dict.items(value), len(value))]
        return {"$": "dict", "v": pairs}
    if isinstance(value, slice):
        return {"$": "slice", "v": [encode(x, refs, _depth + 1)
                                    for x in (value.start, value.stop, value.step)]}
    torch = _torch()
    if torch is not None:
        if isinstance(value, torch.Tensor):
            return _tensor(value, torch)
        if isinstance(value, torch.dtype):
            return {"$": "dtype", "v": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"$": "device", "v": f"{value.type}" + (
                "" if value.index is None else f":{value.index}")}
        if isinstance(value, torch.nn.Module):
            # Only to fingerprint a call's arguments (a model passed in): it never decodes.
            kind = type(value)
            return {"$": "module", "class": f"{kind.__module__}.{kind.__qualname__}",
                    "state": [[k, _tensor(v, torch)] for k, v in _bounded(
                        list(value.state_dict(keep_vars=True).items()), MAX_ITEMS)]}
    np = _numpy()
    if np is not None:
        if isinstance(value, np.ndarray):
            return _ndarray(value, np)
        if isinstance(value, np.generic):
            return {"$": "npscalar", "v": _ndarray(np.asarray(value), np)}
    if refs is not None:
        ref = refs(value)
        if ref is not None:
            return ref
    raise Unencodable(f"a {kind.__module__}.{kind.__qualname__} has no plain-data form")


def decode(data, refs=None):
    """The value that ``data`` describes; ``refs(data)`` resolves {"$": "ref"} entries."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v, refs) for v in data]
    if type(data) is not dict:
        raise ValueError(f"not plain data: {type(data).__name__}")
    tag = data.get("$")
    if tag == "int":
        return int(data["v"])
    if tag == "float":
        return float(data["v"])
    if tag == "complex":
        return complex(decode(data["re"]), decode(data["im"]))
    if tag == "bytes":
        return base64.b64decode(data["v"])
    if tag == "tuple":
        return tuple(decode(v, refs) for v in data["v"])
    if tag == "dict":
        return {_hashable(decode(k, refs)): decode(v, refs) for k, v in data["v"]}
    if tag == "slice":
        return slice(*(decode(v) for v in data["v"]))
    if tag == "size":
        import torch
        return torch.Size([int(v) for v in data["v"]])
    if tag == "dtype":
        return _dtype(data["v"])
    if tag == "device":
        import torch
        return torch.device(str(data["v"]))
    if tag == "tensor":
        return _decode_tensor(data)
    if tag == "ndarray":
        return _decode_ndarray(data)
    if tag == "npscalar":
        return _decode_ndarray(data["v"])[()]
    if tag == "ref" and refs is not None:
        return refs(data)
    raise ValueError(f"unknown plain-data tag {tag!r}")


def shape_only(data):
    """``data`` without the numbers inside tensors and arrays: their kind and shape stay.

    Two calls whose arguments differ only in random numbers (a freshly initialised
    model) have the same ``digest(shape_only(...))``.
    """
    if type(data) is list:
        return [shape_only(v) for v in data]
    if type(data) is dict:
        return {k: shape_only(v) for k, v in data.items() if k != "bytes"}
    return data


def digest(data) -> str:
    """A stable fingerprint of encoded data: equal for equal values in any process."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


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
    t = torch.Tensor.detach(t)
    if t.layout != torch.strided:
        raise Unencodable(f"a {t.layout} tensor has no plain-data form")
    n = t.numel()
    if n > MAX_ELEMENTS:
        raise Unencodable(f"a tensor of {n} numbers is more than {MAX_ELEMENTS}")
    device = str(t.device)
    data = {"$": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "device": device,
            "shape": list(t.shape), "requires_grad": bool(t.requires_grad)}
    if t.device.type == "meta":
        return data  # a meta tensor has a shape and a dtype, but no numbers
    flat = t.cpu().contiguous().reshape(-1)
    if t.is_conj():
        flat = flat.resolve_conj()
    raw = flat.view(torch.uint8).numpy().tobytes() if n else b""
    data["bytes"] = base64.b64encode(raw).decode()
    return data


def _decode_tensor(data):
    import torch
    dtype = _dtype(data["dtype"])
    shape = [int(s) for s in data["shape"]]
    device = str(data["device"])
    if "bytes" not in data:
        return torch.empty(shape, dtype=dtype, device=device)
    raw = bytearray(base64.b64decode(data["bytes"]))
    if not raw:
        t = torch.empty(shape, dtype=dtype)
    else:
        t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape).clone()
    if device != "cpu":
        t = t.to(device)
    if data.get("requires_grad") and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


def _ndarray(a, np):
    a = np.ndarray.view(a, np.ndarray)  # a subclass's methods stay behind
    if a.dtype.kind not in "biufc":
        raise Unencodable(f"a NumPy array of {a.dtype} has no plain-data form")
    if a.size > MAX_ELEMENTS:
        raise Unencodable(f"an array of {a.size} numbers is more than {MAX_ELEMENTS}")
    return {"$": "ndarray", "dtype": a.dtype.newbyteorder("<").str, "shape": list(a.shape),
            "bytes": base64.b64encode(np.ascontiguousarray(a, a.dtype.newbyteorder("<"))
                                      .tobytes()).decode()}


def _decode_ndarray(data):
    import numpy as np
    dtype = np.dtype(str(data["dtype"]))
    if dtype.kind not in "biufc":
        raise ValueError(f"not a numeric dtype: {dtype}")
    raw = base64.b64decode(data["bytes"])
    return np.frombuffer(raw, dtype=dtype).reshape([int(s) for s in data["shape"]]).copy()


def _dtype(name):
    import torch
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return dtype


def _hashable(key):
    return tuple(key) if type(key) is list else key


def _torch():
    # Encoding never imports torch or NumPy into a kernel that did not; a value of
    # theirs can exist only where they are imported. Decoding imports what it needs.
    return sys.modules.get("torch")


def _numpy():
    return sys.modules.get("numpy")
