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
"""
from __future__ import annotations

import base64
import io
import math
import sys

MAX_ELEMENTS = 1 << 22  # per tensor or array: 4 Mi numbers, 16 MB of float32
MAX_DEPTH = 20
MAX_ITEMS = 100_000  # per list, tuple or dict
MAX_BYTES = 64 * 1024 * 1024  # per bytes or BytesIO


# Every kind this module writes; a dict with any other "$" is a caller's reference.
KINDS = {"int", "float", "complex", "bytes", "bytesio", "tuple", "dict", "slice", "size",
         "dtype", "device", "tensor", "ndarray", "npscalar", "module", "optimizer"}
# Optimizers rebuilt as themselves, over the parameters of a model passed in the same call.
OPTIMIZERS = ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad")


class Unencodable(ValueError):
    """The value has no plain-data form (a student class, a generator, a huge tensor)."""


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
        return value if abs(value) < 2**53 else {"$": "int", "v": str(value)}
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
        return {"$": "bytesio", "v": _b64(io.BytesIO.getvalue(value)),
                "pos": io.BytesIO.tell(value)}
    if isinstance(value, (list, tuple)):
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        seq = [encode(v, ref, _depth + 1) for v in _bounded(items, len(value))]
        torch = _torch()
        if torch is not None and isinstance(value, torch.Size):
            return {"$": "size", "v": seq}
        return seq if isinstance(value, list) else {"$": "tuple", "v": seq}
    if isinstance(value, dict):
        pairs = [[encode(k, ref, _depth + 1), encode(v, ref, _depth + 1)]
                 for k, v in _bounded(dict.items(value), len(value))]
        return {"$": "dict", "v": pairs}
    if isinstance(value, slice):
        return {"$": "slice", "v": [encode(x, ref, _depth + 1)
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
            return _module(value, torch, ref, _depth)
    np = _numpy()
    if np is not None:
        if isinstance(value, np.ndarray):
            return _ndarray(value, np)
        if isinstance(value, np.generic):
            return {"$": "npscalar", "v": _ndarray(np.asarray(value), np)}
    raise Unencodable(f"a {kind.__module__}.{kind.__qualname__} has no plain-data form")


def decode(data, ref=None):
    """The value that ``data`` describes; ``ref(data)`` resolves the references that
    ``encode``'s ``ref`` made (any dict whose "$" is not a kind of this module)."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v, ref) for v in data]
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
        return _unb64(data["v"])
    if tag == "bytesio":
        buffer = io.BytesIO(_unb64(data["v"]))
        buffer.seek(int(data.get("pos", 0)))
        return buffer
    if tag == "tuple":
        return tuple(decode(v, ref) for v in data["v"])
    if tag == "dict":
        return {_hashable(decode(k, ref)): decode(v, ref) for k, v in data["v"]}
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
    if tag == "module":
        return _decode_module(data, 0)
    if ref is not None and tag not in KINDS:
        return ref(data)
    raise ValueError(f"unknown plain-data tag {tag!r}")


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
    data = {"$": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "device": device,
            "shape": list(t.shape), "requires_grad": requires_grad}
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
    if "bytes" not in data:  # a meta tensor: a shape and a dtype, no numbers
        t = torch.empty(shape, dtype=dtype, device=device)
    else:
        raw = bytearray(_unb64(data["bytes"]))
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
    raw = _unb64(data["bytes"])
    return np.frombuffer(raw, dtype=dtype).reshape([int(s) for s in data["shape"]]).copy()


def _dtype(name):
    import torch
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return dtype


def _b64(raw: bytes) -> str:
    if len(raw) > MAX_BYTES:
        raise Unencodable(f"{len(raw)} bytes is more than {MAX_BYTES}")
    return base64.b64encode(raw).decode()


def _unb64(text) -> bytes:
    raw = base64.b64decode(str(text), validate=True)
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{len(raw)} bytes is more than {MAX_BYTES}")
    return raw


# -- modules ---------------------------------------------------------------------------
def _attrs(*names):
    return lambda m: {n: getattr(m, n) for n in names}


def _with_bias(*names):
    return lambda m: {**{n: getattr(m, n) for n in names}, "bias": m.bias is not None}


# The standard layers rebuilt as themselves: how to read each one's constructor arguments.
# Those with parameters are built on the meta device and then given the sent tensors.
MODULES = {
    "Linear": _with_bias("in_features", "out_features"),
    "Conv1d": _with_bias("in_channels", "out_channels", "kernel_size", "stride", "padding",
                         "dilation", "groups", "padding_mode"),
    "Conv2d": _with_bias("in_channels", "out_channels", "kernel_size", "stride", "padding",
                         "dilation", "groups", "padding_mode"),
    "BatchNorm1d": _attrs("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "BatchNorm2d": _attrs("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "LayerNorm": _attrs("normalized_shape", "eps", "elementwise_affine"),
    "Embedding": _attrs("num_embeddings", "embedding_dim", "padding_idx"),
    "Dropout": _attrs("p"), "Flatten": _attrs("start_dim", "end_dim"),
    "Softmax": _attrs("dim"), "LogSoftmax": _attrs("dim"),
    "MaxPool2d": _attrs("kernel_size", "stride", "padding"),
    "AvgPool2d": _attrs("kernel_size", "stride", "padding"),
    "ReLU": _attrs(), "GELU": _attrs(), "Tanh": _attrs(), "Sigmoid": _attrs(),
    "Identity": _attrs(), "Sequential": _attrs(), "ModuleList": _attrs(),
    "CrossEntropyLoss": _attrs("reduction", "ignore_index", "label_smoothing"),
    "NLLLoss": _attrs("reduction", "ignore_index"), "MSELoss": _attrs("reduction"),
    "L1Loss": _attrs("reduction"), "BCEWithLogitsLoss": _attrs("reduction"),
}
_ON_META = {"Linear", "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding"}


def _module(m, torch, ref, depth):
    if depth > MAX_DEPTH:
        raise Unencodable("modules nested too deeply")
    kind = type(m)
    standard = kind.__module__.startswith("torch.nn.modules") and kind.__name__ in MODULES
    data = {"$": "module", "class": f"{kind.__module__}.{kind.__qualname__}",
            "type": kind.__name__ if standard else None,
            "training": bool(torch.nn.Module.__getattribute__(m, "training"))}
    if standard:
        data["init"] = encode(MODULES[kind.__name__](m), None, depth + 1)
    get = torch.nn.Module.__getattribute__
    data["params"] = [[str(name), None if p is None else {
        "t": _tensor(p, torch), "grad": None if p.grad is None else _tensor(p.grad, torch)}]
        for name, p in _bounded(dict.items(get(m, "_parameters")), MAX_ITEMS)]
    data["buffers"] = [[str(name), None if b is None else _tensor(b, torch)]
                       for name, b in _bounded(dict.items(get(m, "_buffers")), MAX_ITEMS)]
    data["children"] = [[str(name), _module(child, torch, ref, depth + 1)]
                        for name, child in _bounded(dict.items(get(m, "_modules")), MAX_ITEMS)
                        if child is not None]
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


def _decode_module(data, depth: int):
    import torch

    if depth > MAX_DEPTH:
        raise ValueError("modules nested too deeply")
    kind = data.get("type")
    if kind is not None:
        if kind not in MODULES:
            raise ValueError(f"not a standard module: {kind!r}")
        init = decode(data.get("init") or {"$": "dict", "v": []})
        if type(init) is not dict or not all(type(k) is str for k in init):
            raise ValueError("a module's arguments must be named")
        if kind in _ON_META:
            init["device"] = "meta"
        m = getattr(torch.nn, kind)(**init)
    else:
        m = _foreign_module_class()(str(data.get("class", "a module"))[:200])
    _load_state(m, data, depth, torch)
    return m


def _load_state(m, data, depth: int, torch) -> None:
    """Give module ``m`` the parameters, buffers, children and mode that ``data`` holds."""
    for name, p in data.get("params", []):
        name = _member_name(name)
        if p is None:
            m._parameters[name] = None
            continue
        tensor = _decode_tensor(p["t"])
        grad = None if p.get("grad") is None else _decode_tensor(p["grad"])
        param = m._parameters.get(name)
        try:
            # The same Parameter object (an optimizer of the test's may hold it), new data.
            with torch.no_grad():
                param.data = tensor.detach()
            param.requires_grad_(tensor.requires_grad)
        except (AttributeError, RuntimeError):  # none yet, or now on another device
            param = torch.nn.Parameter(tensor.detach(), requires_grad=tensor.requires_grad)
            m._parameters[name] = param
        param.grad = grad
    for name, b in data.get("buffers", []):
        m._buffers[_member_name(name)] = None if b is None else _decode_tensor(b)
    for name, child in data.get("children", []):
        name = _member_name(name)
        existing = m._modules.get(name)
        if existing is not None and _same_kind(existing, child):
            _load_state(existing, child, depth + 1, torch)
        else:
            m._modules[name] = _decode_module(child, depth + 1)
    torch.nn.Module.train(m, bool(data.get("training", True)))


def _same_kind(module, data) -> bool:
    return type(module).__name__ == (data.get("type") or "ForeignModule")


def _member_name(name) -> str:
    name = str(name)
    if not name or "." in name or len(name) > 200:
        raise ValueError(f"not a member name: {name[:40]!r}")
    return name


# -- writing a call's effects back --------------------------------------------------------
def update_in_place(target, data) -> None:
    """Make ``target`` (an argument the test passed) what ``data`` says it became.

    A student function that changed its argument in place (a tensor filled, a model
    trained a step, a buffer written) changed the copy in its own kernel; this gives the
    test's own object the same change.
    """
    torch = _torch()
    if torch is not None and isinstance(target, torch.nn.Module):
        if type(data) is not dict or data.get("$") != "module":
            raise ValueError("the module came back as something else")
        _load_state(target, data, 0, torch)
        return
    if torch is not None and isinstance(target, torch.optim.Optimizer):
        if type(data) is not dict or data.get("$") != "optimizer":
            raise ValueError("the optimizer came back as something else")
        _load_optimizer_state(target, data)  # its parameters are the models' own
        return
    new = decode(data)
    if torch is not None and isinstance(target, torch.Tensor):
        if not isinstance(new, torch.Tensor):
            raise ValueError("the tensor came back as something else")
        with torch.no_grad():
            if (new.shape, new.dtype, new.device) == (target.shape, target.dtype, target.device):
                target.copy_(new)
            else:
                target.data = new
    elif isinstance(target, list) and type(new) is list:
        target[:] = new
    elif isinstance(target, dict) and type(new) is dict:
        target.clear()
        target.update(new)
    elif isinstance(target, bytearray) and type(new) is bytes:
        target[:] = new
    elif isinstance(target, io.BytesIO) and isinstance(new, io.BytesIO):
        target.seek(0)
        target.truncate()
        target.write(new.getvalue())
        target.seek(new.tell())
    else:
        np = _numpy()
        if np is not None and isinstance(target, np.ndarray) and isinstance(new, np.ndarray) \
                and new.shape == target.shape and new.dtype == target.dtype:
            np.copyto(target, new)
        else:
            raise ValueError(f"cannot update a {type(target).__name__} in place")


def mutable(value) -> bool:
    """Whether a call could change ``value`` in place (so its state is sent back)."""
    if isinstance(value, (list, dict, bytearray, io.BytesIO)):
        return True
    torch, np = _torch(), _numpy()
    if torch is not None and isinstance(value, (torch.Tensor, torch.nn.Module,
                                                torch.optim.Optimizer)):
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
    values: list = [None] * len(datas)
    later = []
    for place, data in enumerate(datas):
        if type(data) is dict and data.get("$") == "optimizer":
            later.append(place)
        else:
            values[place] = decode(data)
    for place in later:
        values[place] = _decode_optimizer(datas[place], values)
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
    return {"$": "optimizer", "type": kind, "groups": groups, "state": encode(state["state"]),
            "defaults": encode(dict(opt.defaults))}


def _decode_optimizer(data, values: list):
    import torch

    kind = data.get("type")
    if kind not in OPTIMIZERS:
        raise ValueError(f"not an optimizer the grader rebuilds: {kind!r}")
    groups = []
    for group in data.get("groups", []):
        params = []
        for place, name in group["params"]:
            model = values[int(place)]
            if not isinstance(model, torch.nn.Module):
                raise ValueError("an optimizer's parameters must belong to a model in the call")
            params.append(model.get_parameter(str(name)))
        settings = decode(group["settings"])
        if type(settings) is not dict or not all(type(k) is str for k in settings):
            raise ValueError("an optimizer's settings must be named")
        groups.append({**settings, "params": params})
    opt = getattr(torch.optim, kind)(groups, **_constructor_defaults(kind, data.get("defaults")))
    _load_optimizer_state(opt, data)
    return opt


def _constructor_defaults(kind: str, data) -> dict:
    """The optimizer's own defaults (``optimizer.defaults``, what it was constructed with),
    as keyword arguments its constructor takes; each group also carries its settings."""
    import inspect

    import torch

    if data is None:
        return {}
    defaults = decode(data)
    if type(defaults) is not dict:
        raise ValueError("an optimizer's defaults must be a mapping")
    accepted = inspect.signature(getattr(torch.optim, kind)).parameters
    return {k: v for k, v in defaults.items() if type(k) is str and k in accepted and k != "params"}


def _load_optimizer_state(opt, data) -> None:
    import torch

    described = torch.optim.Optimizer.state_dict(opt)["param_groups"]
    state = decode(data.get("state", {"$": "dict", "v": []}))
    if type(state) is not dict:
        raise ValueError("an optimizer's state must be a mapping")
    opt.load_state_dict({"state": state, "param_groups": described})


def _hashable(key):
    return tuple(key) if type(key) is list else key


def _torch():
    # Encoding never imports torch or NumPy into a kernel that did not; a value of
    # theirs can exist only where they are imported. Decoding imports what it needs.
    return sys.modules.get("torch")


def _numpy():
    return sys.modules.get("numpy")
