"""Plain data: what crosses between the student's kernel and the test kernel."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

from autograder.bridge import plaindata


# -- plain data ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        -(2**70),
        0.1,
        -0.0,
        float("inf"),
        1 + 2j,
        "GPU",
        b"\x00\xff",
        (96, 83),
        [1, [2.5, "x"]],
        {"a": (1, 2), 3: None},
        slice(1, None, 2),
        torch.float16,
        torch.bfloat16,
        torch.device("cpu"),
        torch.Size([16, 4096, 3]),
        np.arange(6.0).reshape(2, 3),
        np.float32(0.5),
    ],
)
def test_plain_values_come_back_equal_and_of_the_same_type(value):
    data = json.loads(json.dumps(plaindata.encode(value)))  # through real JSON
    back = plaindata.decode(data)
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert back == value and repr(back) == repr(value)


@pytest.mark.parametrize(
    "tensor",
    [
        torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),  # not contiguous
        torch.tensor([1.5, float("nan"), -0.0], dtype=torch.bfloat16),
        torch.tensor([[True, False]]),
        torch.zeros(0, 3, dtype=torch.int64),
        torch.tensor(7, dtype=torch.int8),
        torch.ones(2, 2, dtype=torch.complex64),
    ],
)
def test_tensors_keep_dtype_shape_and_exact_bits(tensor):
    back = plaindata.decode(json.loads(json.dumps(plaindata.encode(tensor))))
    assert (back.dtype, back.shape, back.device) == (tensor.dtype, tensor.shape, tensor.device)
    assert torch.equal(
        back.reshape(-1).view(torch.uint8) if back.numel() else back,
        tensor.contiguous().reshape(-1).view(torch.uint8) if tensor.numel() else tensor,
    )


def test_a_meta_tensor_keeps_its_shape_and_no_numbers():
    back = plaindata.decode(plaindata.encode(torch.empty(5, 3, device="meta")))
    assert back.device.type == "meta" and back.shape == (5, 3)


def test_a_lying_subclass_becomes_its_honest_base_value():
    class Liar(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

        def __float__(self):
            return 0.48

    data = plaindata.encode(Liar(4.8e-4))
    back = plaindata.decode(data)
    assert type(back) is float and back == 4.8e-4 and back != 0.48


def test_objects_without_a_plain_form_are_refused():
    class Anything:
        def __eq__(self, other):
            return True

    with pytest.raises(plaindata.Unencodable):
        plaindata.encode(Anything())
    with pytest.raises(plaindata.Unencodable):
        plaindata.encode([1, {"x": object()}])


def test_decoding_runs_no_code_and_rejects_unknown_tags():
    for bad in [
        {"$": "pickle", "v": "gASV"},
        {"$": "dtype", "v": "nn"},
        {"$": "ndarray", "dtype": "|O", "shape": [1], "bytes": ""},
        {"$": "ref"},
        {"$": "module", "type": "Subprocess"},
        {"$": "module", "type": "Linear", "init": {"$": "dict", "v": [[1, 2]]}},
        {"$": "bytes", "v": "not base64!"},
    ]:
        with pytest.raises(ValueError):
            plaindata.decode(bad)


def through_json(value, **kw):
    return plaindata.decode(json.loads(json.dumps(plaindata.encode(value, **kw))))


def test_a_tensor_subclass_is_read_as_the_plain_tensor_under_it():
    class Liar(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in ("__eq__", "equal"):
                return True
            return super().__torch_function__(func, types, args, kwargs or {})

        @property
        def dtype(self):
            return torch.float16

    liar = torch.arange(3, dtype=torch.float64).as_subclass(Liar)
    back = through_json(liar)
    assert type(back) is torch.Tensor and back.dtype == torch.float64
    assert back.tolist() == [0.0, 1.0, 2.0]


def test_standard_modules_come_back_as_themselves_with_their_state():
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.ReLU(),
        torch.nn.BatchNorm1d(4),
        torch.nn.Linear(4, 2, bias=False),
    )
    model[0].weight.grad = torch.ones(4, 3)
    model.eval()
    back = through_json(model)
    assert [type(m) for m in back] == [type(m) for m in model]
    assert back[3].bias is None and not back.training
    for (name, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(back[0].weight.grad, torch.ones(4, 3))
    x = torch.randn(5, 3)
    assert torch.equal(back(x), model(x))  # the test kernel's own forward, same numbers


def test_a_module_of_the_students_own_class_keeps_its_parameters_not_its_code():
    class Mine(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 2)
            self.register_buffer("steps", torch.tensor(3))

        def forward(self, x):
            raise RuntimeError("student code must never run in the test kernel")

    back = through_json(Mine())
    assert type(back).__name__ == "ForeignModule" and "Mine" in repr(back)
    assert isinstance(back.layer, torch.nn.Linear) and int(back.steps) == 3
    assert next(back.parameters()).device.type == "cpu"
    with pytest.raises(NotImplementedError):  # no forward came along
        back(torch.zeros(2))


def test_a_meta_model_and_a_bytes_buffer_cross_too():
    model = torch.nn.Linear(3, 2, device="meta")
    back = through_json(model)
    assert back.weight.device.type == "meta" and back.weight.shape == (2, 3)
    buffer = io.BytesIO()
    torch.save({"w": torch.arange(4)}, buffer)
    copy = through_json(buffer)
    assert copy.getvalue() == buffer.getvalue() and copy.tell() == buffer.tell()


def test_a_meta_model_keeps_requires_grad_so_it_can_train_on_meta():
    """A training step on meta needs parameters that require grad, as on any device."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Linear(4, 3)).to("meta")
    model[1].bias.requires_grad_(False)
    back = through_json(model)
    assert [p.requires_grad for p in back.parameters()] == [True, True, True, False]
    loss = back(torch.empty(5, 2, device="meta")).sum()
    loss.backward()
    assert back[0].weight.grad.device.type == "meta"


@pytest.mark.parametrize(
    "make",
    [
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
        lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.9), amsgrad=True),
        lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.1),
        lambda p: torch.optim.RMSprop(p, lr=0.03, momentum=0.5, centered=True),
        lambda p: torch.optim.Adagrad(p, lr=0.04),
    ],
    ids=["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"],
)
def test_an_optimizer_crosses_with_its_defaults_and_groups(make):
    """`optimizer.defaults` is what it was constructed with: a student's function may read it."""
    model = torch.nn.Linear(2, 3)
    optimizer = make(model.parameters())
    data = json.loads(json.dumps(plaindata.encode_values([model, optimizer])))
    back_model, back = plaindata.decode_values(data)
    assert type(back) is type(optimizer)
    assert back.defaults == optimizer.defaults
    (group,) = back.param_groups
    assert {k: v for k, v in group.items() if k != "params"} == {
        k: v for k, v in optimizer.param_groups[0].items() if k != "params"
    }
    assert [id(p) for p in group["params"]] == [id(p) for p in back_model.parameters()]


def test_references_stand_for_chosen_objects():
    x = torch.ones(2)
    data = plaindata.encode((x, 5), ref=lambda v: {"$": "arg", "i": 0} if v is x else None)
    assert data == {"$": "tuple", "v": [{"$": "arg", "i": 0}, 5]}
    assert plaindata.decode(data, ref=lambda d: x)[0] is x


@pytest.mark.parametrize(
    "target, after",
    [
        (torch.zeros(3), torch.arange(3.0)),
        ([1, 2], [3]),
        ({"a": 1}, {"b": 2}),
        (np.zeros(2), np.ones(2)),
        (bytearray(b"ab"), b"cd"),
    ],
)
def test_only_models_and_optimizers_take_changes_in_place(target, after):
    """Every other argument crosses by value: the test's own object never changes, so no
    expected value a test computes from it afterwards can be the student's."""
    before = repr(target)
    with pytest.raises(ValueError, match="by value"):
        plaindata.update_in_place(target, json.loads(json.dumps(plaindata.encode(after))))
    assert repr(target) == before and not plaindata.in_place(target)


def test_a_model_trained_elsewhere_updates_the_tests_model_in_place():
    model = torch.nn.Linear(2, 1)
    weight = model.weight
    trained = torch.nn.Linear(2, 1)
    with torch.no_grad():
        trained.weight.fill_(7.0)
    plaindata.update_in_place(model, json.loads(json.dumps(plaindata.encode(trained))))
    assert model.weight is weight and torch.all(model.weight == 7.0)


# -- issue 17: what decoding may never do ---------------------------------------------------
def tensor_data(**changes):
    data = plaindata.encode(torch.arange(6, dtype=torch.float32))
    data.update(changes)
    return data


@pytest.mark.parametrize(
    "data",
    [
        tensor_data(shape=[1 << 20]),  # bytes for 6 numbers, a shape of a million
        {k: v for k, v in tensor_data().items() if k != "bytes"},  # no bytes on the CPU
        tensor_data(bytes=tensor_data()["bytes"] + "AAAA"),  # more bytes than numbers
        tensor_data(device="meta"),  # a meta tensor with numbers
        tensor_data(dtype="uint8", shape=[6]),  # 24 bytes for 6 uint8 numbers
    ],
    ids=["short", "none", "long", "meta-with-bytes", "dtype-mismatch"],
)
def test_only_complete_tensors_are_decoded(data):
    """A tensor's bytes are exactly numel x itemsize: the decoder never builds memory it
    did not fill (torch.empty would hand back whatever the process held there before)."""
    with pytest.raises(ValueError):
        plaindata.decode(json.loads(json.dumps(data)))


def test_a_shape_past_the_bounds_is_refused_before_anything_is_built():
    huge = {"$": "tensor", "dtype": "float32", "device": "meta", "shape": [560_000_000]}
    with pytest.raises(plaindata.TooCostly):
        plaindata.decode(huge)
    with pytest.raises(plaindata.TooCostly):
        plaindata.decode({**huge, "shape": [1] * 40})
    ok = plaindata.decode({**huge, "shape": [1000, 1000]})
    assert ok.device.type == "meta" and ok.shape == (1000, 1000)


def test_no_name_in_the_data_is_looked_up_on_a_module_or_imports_one():
    """Dtypes, devices, layers and optimizers come from fixed tables: torch's lazy
    submodules (_dynamo, _inductor, onnx) and deprecation shims are never reached."""
    code = """
import json, sys, warnings
warnings.simplefilter("error")
import torch
from autograder.bridge import plaindata
names = ["has_cuda", "_dynamo", "_inductor", "onnx", "nn", "Tensor", "__class__", "float32 "]
for name in names:
    for data in [{"$": "dtype", "v": name}, {"$": "tensor", "dtype": name, "device": "meta", "shape": [1]},
                 {"$": "module", "type": name}, {"$": "device", "v": name}]:
        try:
            plaindata.decode(data)
        except ValueError:
            pass
        else:
            raise SystemExit(f"decoded {data}")
try:
    plaindata.decode_values([{"$": "optimizer", "type": "_dynamo", "groups": []}])
except ValueError:
    pass
loaded = [m for m in ("torch._dynamo", "torch._inductor", "torch.onnx") if m in sys.modules]
print(json.dumps(loaded))
"""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_reply_of_too_many_modules_is_refused_early():
    """27,000 layers under every other limit once kept a test kernel busy for minutes: a
    reply rebuilds at most MAX_MODULES modules, then is refused, whatever else it holds."""
    conv = plaindata.encode(torch.nn.Conv2d(1, 1, 1))
    data = {
        "$": "module",
        "class": "torch.nn.modules.container.Sequential",
        "type": "Sequential",
        "training": True,
        "init": {"$": "dict", "v": []},
        "params": [],
        "buffers": [],
        "children": [[str(i), conv] for i in range(plaindata.MAX_MODULES + 5)],
    }
    with pytest.raises(plaindata.TooCostly, match="modules"):
        plaindata.decode(json.loads(json.dumps(data)))


def test_one_budget_bounds_a_whole_reply():
    budget = plaindata.Budget()
    budget.bytes = 100
    small = plaindata.encode(torch.zeros(10))  # 40 bytes each
    plaindata.decode(small, budget=budget)
    plaindata.decode(small, budget=budget)
    with pytest.raises(plaindata.TooCostly):
        plaindata.decode(small, budget=budget)


def trained(model, change):
    data = json.loads(json.dumps(plaindata.encode(model)))
    change(data)
    return data


@pytest.mark.parametrize(
    "change, words",
    [
        (
            lambda d: d["buffers"].append(
                ["leak", {"$": "tensor", "dtype": "uint8", "device": "meta", "shape": [64]}]
            ),
            "buffers changed",
        ),
        (lambda d: d["params"].pop(), "parameters changed"),
        (
            lambda d: d["params"][0][1]["t"].update(plaindata.encode(torch.zeros(2, 2))),
            "came back as",
        ),
        (
            lambda d: d["params"][0][1]["t"].update(
                plaindata.encode(torch.zeros(3, 2, dtype=torch.float64))
            ),
            "came back as",
        ),
        (lambda d: d.update(type="Conv1d"), "another kind"),
        (
            lambda d: d["params"][-1][1].update(
                grad=plaindata.encode(torch.zeros(3, device="meta"))
            ),
            "grad came back on meta",
        ),
    ],
    ids=["new-buffer", "removed-parameter", "new-shape", "new-dtype", "new-kind", "grad-elsewhere"],
)
def test_a_model_may_change_only_the_values_of_the_members_it_has(change, words):
    model = torch.nn.Linear(2, 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    data = trained(torch.nn.Linear(2, 3), change)
    with pytest.raises(ValueError, match=words):
        plaindata.update_in_place(model, data)
    assert set(model.state_dict()) == set(before)  # nothing added, nothing half-written
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert not list(model.buffers())


def test_a_change_pytorch_refuses_halfway_leaves_the_whole_model_as_it_was():
    """The first layer's weight comes back right, the second's on meta: PyTorch refuses
    the second only as it is set, after the first was. The first is put back (the tenth
    outside attack's 26)."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 2))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    first = model[0].weight
    data = plaindata.encode(model)
    data["children"][0][1]["params"][0][1]["t"] = plaindata.encode(torch.full((3, 2), 7.0))
    data["children"][1][1]["params"][0][1]["t"] = plaindata.encode(torch.zeros(2, 3, device="meta"))
    with pytest.raises(RuntimeError):
        plaindata.update_in_place(model, json.loads(json.dumps(data)))
    assert model[0].weight is first and model[0].weight.device.type == "cpu"
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())


def test_a_reply_refused_for_its_optimizer_leaves_the_model_as_it_was_too():
    """The model's state comes back acceptable, the optimizer's not: the reply is refused
    as a whole, and the model keeps its weights (a thirteenth outside attack's A8: the
    model had kept the refused reply's weights)."""
    model = torch.nn.Linear(2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model_data = plaindata.encode(model)
    model_data["params"][0][1]["t"] = plaindata.encode(torch.full((3, 2), 42.0))
    bad_state = {0: {"momentum_buffer": torch.zeros(100)}}
    optimizer_data = {
        "$": "optimizer",
        "type": "SGD",
        "groups": [],
        "state": plaindata.encode(bad_state),
    }
    with pytest.raises(ValueError, match="shape"):
        plaindata.update_all_in_place(
            [(model, json.loads(json.dumps(model_data))), (optimizer, optimizer_data)]
        )
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert optimizer.state_dict()["state"] == {}


@pytest.mark.parametrize(
    "state, words",
    [
        ({0: {"momentum_buffer": torch.zeros(3, 2), "stolen": torch.zeros(3)}}, "no state named"),
        ({0: {"momentum_buffer": torch.zeros(100)}}, "shape"),
        ({7: {"momentum_buffer": torch.zeros(3, 2)}}, "per parameter"),
        ({0: {"momentum_buffer": torch.zeros(())}}, "shape"),  # one number: only a step
    ],
    ids=["unknown-name", "wrong-shape", "unknown-parameter", "scalar-buffer"],
)
def test_an_optimizer_takes_only_its_own_kind_of_state(state, words):
    model = torch.nn.Linear(2, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = {"$": "optimizer", "type": "SGD", "groups": [], "state": plaindata.encode(state)}
    with pytest.raises(ValueError, match=words):
        plaindata.update_in_place(optimizer, json.loads(json.dumps(data)))
    assert not optimizer.state


def test_dict_keys_chosen_to_share_one_hash_are_refused_before_the_dict_is_built():
    """Ints hash the same in every process: 30,000 keys that all hash to 0 would take the
    test kernel minutes to put in a dict."""
    p = 2**61 - 1
    colliding = {"$": "dict", "v": [[plaindata.encode(k * p), 0] for k in range(1, 30_001)]}
    with pytest.raises(plaindata.TooCostly, match="share one hash"):
        plaindata.decode(json.loads(json.dumps(colliding)))
    spread = {"$": "dict", "v": [[k, 0] for k in range(30_000)]}
    assert len(plaindata.decode(spread)) == 30_000


def test_text_in_one_reply_is_bounded():
    """A test's failure message quotes the answer: 40 million characters would make the
    trusted kernel's own message too large to reach the grader."""
    with pytest.raises(plaindata.TooCostly, match="characters"):
        plaindata.decode(["x" * 3_000_000, "y" * 2_000_000])
    assert plaindata.decode(["x" * 1_000_000]) == ["x" * 1_000_000]


def _layer(kind: str, init: dict, params=()) -> dict:
    return {
        "$": "module",
        "class": f"torch.nn.modules.{kind}",
        "type": kind,
        "training": True,
        "init": plaindata.encode(init),
        "params": list(params),
        "buffers": [],
        "children": [],
    }


@pytest.mark.parametrize(
    "kind, init, words",
    [
        # Deprecated arguments run torch's shims (and print their warning) in the test kernel.
        ("CrossEntropyLoss", {"reduce": False, "size_average": True}, "not built with"),
        # A module among a layer's arguments would restart the nesting count.
        ("ModuleList", {"modules": []}, "not built with"),
        ("Linear", {"in_features": 2, "out_features": 3, "device": "cpu"}, "not built with"),
        ("Dropout", {"p": [[0.5]]}, "arguments are"),
        ("Flatten", {"start_dim": tuple(range(20))}, "arguments are"),
    ],
)
def test_a_layer_is_built_only_with_the_arguments_of_its_table(kind, init, words, recwarn):
    """Constructor arguments come from a fixed table per layer (outside attack, round 4)."""
    with pytest.raises(ValueError, match=words):
        plaindata.decode(_layer(kind, init))
    assert not [w for w in recwarn if "deprecated" in str(w.message)]


def test_a_standard_layer_still_crosses_with_the_arguments_it_was_built_with():
    built = plaindata.decode(plaindata.encode(torch.nn.Conv2d(3, 4, (3, 5), padding="same")))
    assert (built.kernel_size, built.padding, built.bias is not None) == ((3, 5), "same", True)
    loss = plaindata.decode(plaindata.encode(torch.nn.CrossEntropyLoss(label_smoothing=0.1)))
    assert (loss.label_smoothing, loss.reduction) == (0.1, "mean")


def test_a_float_longer_than_python_writes_one_is_refused_before_it_is_converted():
    """Attack 21 (a01): a reply padded with floats of 770 digits (halfway cases, slow to
    round) cost the test kernel 2.2 CPU s a reply before it was read."""
    from autograder.bridge import protocol

    assert protocol.loads('{"x": [1.5, -2.25e-300, 1.7976931348623157e+308]}')["x"][0] == 1.5
    with pytest.raises(ValueError, match="no plain value"):
        protocol.loads('{"ok": 1, "pad": [0.' + "5" * 770 + "]}")


def test_an_int_longer_than_plaindata_writes_one_is_refused_before_it_is_converted():
    """Attack 22 (a01): bare integers of 4,299 digits passed the parse, and each cost the
    test kernel 195 us to quote in a message; plaindata writes one only below 2**53."""
    from autograder.bridge import plaindata, protocol

    largest = 2**53 - 1
    assert (
        protocol.loads(protocol.dumps({"x": [plaindata.encode(-largest), 0]}))["x"][0] == -largest
    )
    assert plaindata.encode(2**53) == {"$": "int", "v": str(2**53)}  # larger: a string
    with pytest.raises(ValueError, match="no plain value"):
        protocol.loads('{"raised": {"type": "E", "message": ' + "9" * 4299 + "}}")


def test_a_message_says_what_it_weighed_on_the_wire():
    """The bound on what a submission's replies weigh counts bytes: a character of a
    string can be 4 of them (attack 22: astral characters weighed a quarter of their bytes)."""
    from autograder.sandbox.messages import WIRE_BYTES, BoundedSession

    session = BoundedSession(key=b"k")
    text = "\U0001f600" * 1000
    frames = session.serialize(session.msg("display_data", {"data": {"x": text}}))
    _, frames = session.feed_identities(frames)
    msg = session.deserialize(frames)
    assert msg["content"]["data"]["x"] == text
    assert msg[WIRE_BYTES] >= 4 * len(text) > 0


def test_a_message_of_bytes_that_are_not_utf8_weighs_what_the_grader_passes_on():
    """Each byte that is not UTF-8 is read as U+FFFD, 3 bytes when passed on to the test
    kernel: it weighs 3 (attack 35: raw 0xFF bytes weighed a third of their cost)."""
    from autograder.sandbox.messages import WIRE_BYTES, BoundedSession

    session = BoundedSession(key=b"k")
    frames = session.serialize(session.msg("display_data", {"data": {"x": "a"}}))
    _, frames = session.feed_identities(frames)
    frames[4] = b'{"data": {"x": "' + b"\xff" * 1000 + b'"}}'
    frames[0] = session.sign(frames[1:5])
    msg = session.deserialize(frames)
    assert msg["content"]["data"]["x"] == "\ufffd" * 1000
    assert msg[WIRE_BYTES] >= 3 * 1000
    # Text that is UTF-8 weighs its bytes: the grader passes it on as it came.
    frames[4] = b'{"data": {"x": "' + "\U0001f600".encode() * 1000 + b'"}}'
    frames[0] = session.sign(frames[1:5])
    assert session.deserialize(frames)[WIRE_BYTES] == sum(len(f) for f in frames[1:5])
