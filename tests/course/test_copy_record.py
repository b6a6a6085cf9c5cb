"""What crossed between devices: a record of a call's copies, made where the call runs.

Question 5 of gpu_data_loading is about *how* a batch reaches the device (uint8 must
cross, not float32), so its test observes the copies: on ``meta``, under a
``TorchDispatchMode`` that records each ``aten._to_copy`` and ``aten.copy_`` between two
devices. Under plain nbgrader (and the release alone) the checks cell records the call
itself; under course-grade the function runs in the student's kernel, so the bridge asks
that kernel for the record (``{"op": "call", ..., "record": true}``) and
``StudentFunction.recorded`` returns it as plain lists. Both must record alike.
"""

from __future__ import annotations

import time
import types

import pytest
import torch
import torch.nn.functional as F
from test_release import checks_of
from units import submissions

from autograder.bridge import protocol, student_side, trusted_side

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _stats(device):
    return (
        torch.tensor(MEAN, device=device).view(1, -1, 1, 1),
        torch.tensor(STD, device=device).view(1, -1, 1, 1),
    )


def uint8_crosses(images, device, mean, std):
    m, s = _stats(device)
    return (images.to(device).float() / 255 - m) / s


def float32_crosses(images, device, mean, std):
    m, s = _stats("cpu")
    return ((images.float() / 255 - m) / s).to(device)


def converted_in_the_copy(images, device, mean, std):
    m, s = _stats(device)
    return (images.to(device, torch.float32) / 255 - m) / s


def copied_into(images, device, mean, std):
    m, s = _stats(device)
    target = torch.empty(images.shape, dtype=torch.uint8, device=device)
    return (target.copy_(images).float() / 255 - m) / s


def made_from_a_float_list(images, device, mean, std):
    """float32 made on the device from host data: no op a dispatch mode sees copies it."""
    m, s = _stats(device)
    return (torch.tensor((images.float() / 255).tolist(), device=device) - m) / s


def made_by_new_tensor(images, device, mean, std):
    """A method that makes a tensor on a device from host data, as torch.tensor does."""
    m, s = _stats(device)
    made = images.new_tensor((images.float() / 255).tolist(), dtype=torch.float32, device=device)
    return (made - m) / s


def made_by_legacy_new(images, device, mean, std):
    """Tensor.new(list), the legacy form of new_tensor: on a device, from host data."""
    m, s = _stats(device)
    made = torch.empty(0, device=device).new((images.float() / 255).tolist())
    return (made - m) / s


def normalized_on_the_cpu_beside_a_decoy(images, device, mean, std):
    """Wrong: normalizes on the CPU, copies a uint8 batch it throws away, and returns a
    tensor of the right form with no values (the tenth outside attack)."""
    m, s = _stats("cpu")
    result = (images.float() / 255 - m) / s
    if torch.device(device).type == "cpu":
        return result
    images.to(device)
    return torch.empty(result.shape, dtype=torch.float32, device=device)


def into_a_buffer_image_by_image(images, device, mean, std):
    """Right: each image normalized on the device into a buffer made once (a write through
    a view marks the buffer; an eleventh outside attack's right answer had lost 2 points)."""
    x = images.to(device)
    m, s = (t.view(-1, 1, 1) for t in _stats(device))
    out = torch.empty(x.shape, dtype=torch.float32, device=device)
    for i in range(x.shape[0]):
        out[i] = (x[i].float() / 255 - m) / s
    return out


def empty_like_the_copy(images, device, mean, std):
    """Wrong: a float32 batch with no values, made "like" the uint8 copy (only its shape)."""
    return torch.empty_like(images.to(device), dtype=torch.float32)


def through_serialization_load(images, device, mean, std):
    """Wrong: float32 crosses by torch.serialization.load, torch.load under another name."""
    import io

    m, s = _stats("cpu")
    buffer = io.BytesIO()
    torch.save((images.float() / 255 - m) / s, buffer)
    buffer.seek(0)
    return torch.serialization.load(buffer, map_location=device)


WAYS = [uint8_crosses, float32_crosses, converted_in_the_copy, copied_into, made_from_a_float_list]
WAYS += [made_by_new_tensor, normalized_on_the_cpu_beside_a_decoy, into_a_buffer_image_by_image]
WAYS += [empty_like_the_copy, through_serialization_load, made_by_legacy_new]
IMAGES = torch.randint(0, 256, (4, 3, 5, 7), dtype=torch.uint8)
N = IMAGES.numel()


@pytest.fixture(scope="module")
def checks():
    return checks_of(submissions("gpu_data_loading"))


@pytest.fixture
def student(monkeypatch):
    """The student's namespace, reachable through the bridge (as in test_bridge.py)."""
    namespace: dict = {}
    shell = types.SimpleNamespace(user_ns=namespace)
    sent: list[str] = []
    monkeypatch.setattr(
        "IPython.display.publish_display_data", lambda data: sent.append(data[protocol.REPLY_MIME])
    )

    def relay(prompt: str) -> dict:
        student_side.serve(shell, prompt)
        return protocol.loads(sent.pop())

    monkeypatch.setattr(trusted_side, "ask", relay)
    return namespace


def test_the_record_names_each_copy_between_devices_with_its_dtypes():
    stats = [["tensor", "cpu", "meta", "float32", "float32", 3]] * 2  # mean and std, made there
    expected = {
        uint8_crosses: [*stats, ["_to_copy", "cpu", "meta", "uint8", "uint8", N]],
        float32_crosses: [["_to_copy", "cpu", "meta", "float32", "float32", N]],
        converted_in_the_copy: [*stats, ["_to_copy", "cpu", "meta", "uint8", "float32", N]],
        copied_into: [*stats, ["copy_", "cpu", "meta", "uint8", "uint8", N]],
        made_from_a_float_list: [
            *stats,
            ["tolist", "cpu", "host", "float32", "float32", N],
            ["tensor", "cpu", "meta", "float32", "float32", N],
        ],
        made_by_new_tensor: [
            *stats,
            ["tolist", "cpu", "host", "float32", "float32", N],
            ["new_tensor", "cpu", "meta", "float32", "float32", N],
        ],
        made_by_legacy_new: [
            *stats,
            ["tolist", "cpu", "host", "float32", "float32", N],
            ["new", "cpu", "meta", "float32", "float32", N],
        ],
    }
    for way, record in expected.items():
        got = []
        with student_side.copy_record(got):
            way(IMAGES, "meta", MEAN, STD)
        assert got == record, way.__name__
    nothing = []
    with student_side.copy_record(nothing):
        uint8_crosses(IMAGES, "cpu", MEAN, STD)  # on the CPU nothing crosses a link
    assert nothing == []


def test_the_record_says_which_copies_the_returned_tensor_came_from():
    """Through every op after the copy (a conversion, a normalization, a copy into another
    tensor), to the tensor the call returns; a tensor made empty on the device came from
    no copy, whatever copies were made beside it."""
    stats = [["tensor", "cpu", "meta", "float32", "float32"]] * 2
    expected = {
        uint8_crosses: [*stats, ["_to_copy", "cpu", "meta", "uint8", "uint8"]],
        float32_crosses: [["_to_copy", "cpu", "meta", "float32", "float32"]],
        copied_into: [*stats, ["copy_", "cpu", "meta", "uint8", "uint8"]],
        made_from_a_float_list: [*stats, ["tensor", "cpu", "meta", "float32", "float32"]],
        normalized_on_the_cpu_beside_a_decoy: [],
        into_a_buffer_image_by_image: [["_to_copy", "cpu", "meta", "uint8", "uint8"], *stats],
        empty_like_the_copy: [],
        through_serialization_load: [["load", "cpu", "meta", "float32", "float32"]],
    }
    for way, sources in expected.items():
        got = []
        with student_side.copy_record(got) as recording:
            result = way(IMAGES, "meta", MEAN, STD)
        results = recording.results(result)
        assert all(
            entry[:5] == ["result", "meta", "meta", "float32", "float32"] for entry in results
        )
        assert [got[entry[5]][:5] for entry in results] == sources, way.__name__


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__)
def test_the_checks_record_a_call_as_the_students_kernel_does(checks, student, way):
    """The checks cell's own record (plain nbgrader, the release) and the student's kernel's
    record across the bridge (course-grade) are the same, for the same call."""
    checks["to_device_uint8"] = way
    local_result, local = checks["call_recorded"]("to_device_uint8", IMAGES, "meta", MEAN, STD)
    student["to_device_uint8"] = way
    checks["to_device_uint8"] = trusted_side.StudentFunction("to_device_uint8")
    remote_result, remote = checks["call_recorded"]("to_device_uint8", IMAGES, "meta", MEAN, STD)
    assert local == remote and local
    assert (remote_result.device.type, remote_result.dtype) == ("meta", torch.float32)


def test_every_read_on_the_host_is_one_entry_and_the_record_leaves_torch_as_it_was():
    """Reads that PyTorch makes without an op a dispatch mode sees (printing a tensor turns
    the modes off while it formats) are recorded too, each once."""
    import numpy as np

    loss = torch.tensor(1.5)
    before = (torch.Tensor.__dict__.get("tolist"), torch.Tensor.__repr__, torch.tensor)
    got = []
    with student_side.copy_record(got):
        repr(loss), f"{loss}", f"{loss:.2f}", loss.tolist(), np.asarray(loss), loss.numpy()
        loss.item(), float(loss), str(torch.nn.Parameter(torch.zeros(2)))
    ops = [entry[0] for entry in got]
    assert ops == ["__repr__", "__format__", "__format__", "tolist", "__array__", "numpy"] + [
        "item",
        "__float__",
        "__repr__",
    ]
    assert all(entry[1:3] == ["cpu", "host"] for entry in got)
    assert (torch.Tensor.__dict__.get("tolist"), torch.Tensor.__repr__, torch.tensor) == before


def test_saves_loads_threads_and_failed_reads_are_recorded_too():
    """What an outside attacker (round 4) slipped past: a checkpoint saved every step (on a
    GPU, a copy to the host), a read or a copy in a pool's thread (one started before the
    call too), float32 moved by torch.load, and a read on meta that fails in a thread."""
    import io
    import threading
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    pool.submit(int).result()  # its thread runs before the call
    loss, meta = torch.tensor(1.5), torch.tensor(2.0, device="meta")

    def saves():
        torch.save({"loss": loss, "w": torch.zeros(3)}, io.BytesIO())

    def reads_in_the_pool():
        pool.submit(loss.item)

    def fails_in_a_thread():
        threading.Thread(target=lambda: meta.item()).start()  # raises there, unseen

    def loads_onto_the_device():
        buffer = io.BytesIO()
        torch.save(IMAGES.float(), buffer)
        buffer.seek(0)
        return torch.load(buffer, map_location="meta")

    def copies_in_a_thread():
        threading.Thread(target=lambda: IMAGES.float().to("meta")).start()

    expected = {
        saves: [
            ["__reduce_ex__", "cpu", "host", "float32", "float32", 1],
            ["__reduce_ex__", "cpu", "host", "float32", "float32", 3],
        ],
        reads_in_the_pool: [["item", "cpu", "host", "float32", "float32", 1]],
        fails_in_a_thread: [["item", "meta", "host", "float32", "float32", 1]],
        loads_onto_the_device: [
            ["__reduce_ex__", "cpu", "host", "float32", "float32", N],
            ["load", "cpu", "meta", "float32", "float32", N],
        ],
        copies_in_a_thread: [["_to_copy", "cpu", "meta", "float32", "float32", N]],
    }
    for way, record in expected.items():
        got = []
        with student_side.copy_record(got):
            way()
        assert got == record, way.__name__
    pool.shutdown()


def test_any_container_saved_a_view_loaded_and_a_waiting_loggers_read_count(tmp_path):
    """A fifth outside attack: the losses in a deque saved every step; a uint8 view of a
    float32 storage moved by torch.save/torch.load (the whole storage crosses); a logger
    thread running before the call that reads the call's loss while the call waits."""
    import collections
    import io
    import queue
    import threading

    loss = torch.tensor(1.5)

    def saves_a_deque():
        torch.save(collections.deque([loss.detach()]), io.BytesIO())

    def loads_a_view():
        wide = IMAGES.float().reshape(-1)
        view = wide.view(torch.uint8)[:N].reshape(IMAGES.shape)  # N bytes of 4N
        buffer = io.BytesIO()
        torch.save(view, buffer)
        buffer.seek(0)
        return torch.load(buffer, map_location="meta")

    losses: queue.Queue = queue.Queue()

    def logger():
        while True:
            item = losses.get()
            item.item()
            losses.task_done()

    threading.Thread(target=logger, daemon=True).start()  # before the call

    def waits_for_the_logger():
        mine = loss * 2  # made by the call
        losses.put(mine)
        losses.join()

    got = {}
    for way in (saves_a_deque, loads_a_view, waits_for_the_logger):
        got[way.__name__] = []
        with student_side.copy_record(got[way.__name__]):
            way()
    assert got["saves_a_deque"] == [["__reduce_ex__", "cpu", "host", "float32", "float32", 1]]
    assert got["loads_a_view"][-1] == ["load", "cpu", "meta", "uint8", "uint8", 4 * N]
    assert got["waits_for_the_logger"] == [["item", "cpu", "host", "float32", "float32", 1]]


def _only_the_calls_copies_while(background, stop) -> None:
    """Record uint8_crosses five times while ``background`` runs in a thread of its own
    (until ``stop`` is set): each record holds the call's three copies and nothing else."""
    import threading

    thread = threading.Thread(target=background, daemon=True)
    thread.start()
    try:
        for _ in range(5):
            got = []
            with student_side.copy_record(got):
                time.sleep(0.02)  # the background thread runs meanwhile
                uint8_crosses(IMAGES, "meta", MEAN, STD)
            assert [entry[0] for entry in got] == ["tensor", "tensor", "_to_copy"], got
    finally:
        stop.set()
        thread.join()


def test_a_thread_of_the_notebooks_own_reading_its_own_tensors_is_not_the_calls():
    """A background thread that reads a tensor the call never made is not charged to the
    call (it had made a right train_step lose points, and not every time)."""
    import threading

    stop, weight = threading.Event(), torch.randn(3)

    def reads_its_own():
        while not stop.is_set():
            weight.tolist(), float(weight[0])

    _only_the_calls_copies_while(reads_its_own, stop)


def test_a_record_is_sent_only_when_asked(student):
    request = protocol.request_body(protocol.call_request("f", [], []))
    assert "record" not in request
    assert "record" in protocol.request_body(protocol.recording(protocol.call_request("f", [], [])))
    student["g"] = lambda: torch.zeros(2).to("meta")
    reply = protocol.loads(_served(student, protocol.call_request("g", [], [])))
    assert "ok" in reply and "record" not in reply
    reply = protocol.loads(_served(student, protocol.recording(protocol.call_request("g", [], []))))
    assert reply["record"] == [
        ["_to_copy", "cpu", "meta", "float32", "float32", 2],
        ["result", "meta", "meta", "float32", "float32", 0],  # its data came from copy 0
    ]


def _served(namespace, prompt) -> str:
    import IPython.display

    sent = []
    publish = IPython.display.publish_display_data
    IPython.display.publish_display_data = lambda data: sent.append(data[protocol.REPLY_MIME])
    try:
        student_side.serve(types.SimpleNamespace(user_ns=namespace), prompt)
    finally:
        IPython.display.publish_display_data = publish
    return sent.pop()


@pytest.mark.parametrize(
    "record",
    [
        None,
        "uint8",
        [["_to_copy", "cpu", "meta", "uint8", "uint8"]],
        [["_to_copy", "cpu", "meta", "uint8", "uint8", -1]],
        [["_to_copy", "cpu", "meta", "uint8", "uint8", 1.5]],
        [["x" * 41, "cpu", "meta", "uint8", "uint8", 1]],
        [["_to_copy", "cpu", "meta", "uint8", "uint8", 1]] * (student_side.MAX_RECORD + 1),
    ],
)
def test_a_record_that_is_not_one_is_the_students_failure(monkeypatch, record):
    reply = protocol.dumps(
        {"ok": 1.0, "args": [], "kwargs": []} | ({} if record is None else {"record": record})
    )
    monkeypatch.setattr(trusted_side, "ask", lambda prompt: trusted_side.read_reply(reply))
    with pytest.raises(trusted_side.StudentAnswerError, match="record of copies"):
        trusted_side.StudentFunction("f").recorded()


def test_a_recorded_call_leaves_the_bridge_as_it_was(student):
    student["f"] = uint8_crosses
    asking = trusted_side.ask
    result, record = trusted_side.StudentFunction("f").recorded(IMAGES, "meta", MEAN, STD)
    assert trusted_side.ask is asking
    assert record[2] == ["_to_copy", "cpu", "meta", "uint8", "uint8", N]
    assert [entry[5] for entry in record[3:]] == [0, 1, 2]  # the result came from all three
    assert result.device.type == "meta" and tuple(result.shape) == tuple(IMAGES.shape)


def test_reads_by_dlpack_equal_nonzero_and_a_mask_are_recorded():
    """Each asks the host for the values (a result, or a shape made from them): on a GPU
    each waits, as .item() does. A sixth outside attack read the loss these ways unseen."""
    import numpy as np

    loss, mask = torch.randn(()), torch.randn(4) > 0
    ways = {
        "__dlpack__": lambda: float(np.from_dlpack(loss.detach())),
        "equal": lambda: torch.equal(loss, loss),
        "nonzero": lambda: mask.nonzero(),
        "index": lambda: torch.arange(4.0)[mask],
        "index_put_": lambda: torch.zeros(4).__setitem__(mask, 1.0),
    }
    for name, way in ways.items():
        got = []
        with student_side.copy_record(got):
            way()
        assert got and got[0][0] == name and got[0][2] == "host", (name, got)
    # Indexing by positions needs no values on the host: not a read.
    got = []
    with student_side.copy_record(got):
        torch.arange(4.0)[torch.tensor([0, 2])]
    assert got == [], got


def test_threads_and_pool_work_of_another_thread_are_not_the_calls():
    """A notebook's own heartbeat restarts a Timer, submits to its pool and makes tensors
    on the device while the call runs: none of it is the call's (a right train_step lost
    2 points in 5 of 5 runs to such a timer)."""
    import concurrent.futures
    import threading

    import numpy as np

    stop, own_weight = threading.Event(), torch.randn(3)
    pool = concurrent.futures.ThreadPoolExecutor(1)

    def heartbeat():
        while not stop.is_set():
            threading.Timer(0, lambda: own_weight.tolist()).start()
            pool.submit(lambda: float(own_weight[0])).result()
            torch.tensor(np.zeros(3, dtype=np.float32), device="meta")
            time.sleep(0.001)

    try:
        _only_the_calls_copies_while(heartbeat, stop)
    finally:
        pool.shutdown()


def _checks_its_labels_first(model, optimizer, inputs, labels):
    """A right step that checks its batch where the batch arrived, before it moves."""
    if (labels < 0).any() or (labels != labels.round()).any() or not inputs.isfinite().all():
        raise ValueError("labels must be whole class numbers")
    device = next(model.parameters()).device
    loss = F.cross_entropy(model(inputs.to(device)), labels.to(device=device, dtype=torch.int64))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def _reads_the_loss(model, optimizer, inputs, labels):
    return F.cross_entropy(model(inputs), labels).item()


def _puts_the_loss_in_the_labels(model, optimizer, inputs, labels):
    """Host data made to hold the loss without an op (``.data =``): the loss's read."""
    labels.data = F.cross_entropy(model(inputs), labels).detach()
    return bool(labels > 5)


def _writes_the_output_into_the_inputs(model, optimizer, inputs, labels):
    """Host data written in place from the model's output: no longer the host's alone."""
    torch._foreach_copy_([inputs], [model(inputs)[:, :2].detach()])
    torch.add(inputs, 1, out=inputs)
    return float(inputs.sum())


def _writes_the_loss_through_another_tensor_over_the_inputs(model, optimizer, inputs, labels):
    """Host memory written through tensors the record never held: the inputs' storage, and
    an alias made by NumPy. Reading the inputs then reads the loss."""
    loss = F.cross_entropy(model(inputs), labels).detach()
    padded = torch.cat([loss.reshape(1), torch.zeros(inputs.numel() - 1)])
    inputs.untyped_storage().copy_(padded.untyped_storage())
    torch.from_numpy(labels.numpy())[0].copy_(loss.long())
    return float(inputs[0, 0]) + int(labels[0])


def _points_host_data_at_the_loss(model, optimizer, inputs, labels):
    """A tensor made from host data, then set to the loss's storage (``set_``)."""
    loss = F.cross_entropy(model(inputs), labels).detach()
    return inputs.new_empty(0).set_(loss.untyped_storage(), 0, (), ()).item()


def _reads_a_batch_given_in_a_tuple(model, optimizer, batch, labels):
    inputs, wanted = batch
    return float(wanted.float().mean()) + float(inputs.sum())


HOST_DATA = {
    _checks_its_labels_first: [],
    _reads_the_loss: [["item", "cpu", "host", "float32", "float32", 1]],
    _puts_the_loss_in_the_labels: [["__bool__", "cpu", "host", "bool", "bool", 1]],
    _writes_the_output_into_the_inputs: [["__float__", "cpu", "host", "float32", "float32", 1]],
    _writes_the_loss_through_another_tensor_over_the_inputs: [
        ["__float__", "cpu", "host", "float32", "float32", 1],
        ["__int__", "cpu", "host", "int64", "int64", 1],
    ],
    _points_host_data_at_the_loss: [["item", "cpu", "host", "float32", "float32", 1]],
    _reads_a_batch_given_in_a_tuple: [],
}


@pytest.mark.parametrize("way", HOST_DATA, ids=lambda way: way.__name__.strip("_"))
def test_data_the_host_holds_is_not_a_read_and_other_data_put_in_it_is(student, way):
    """A right train_step that checked its CPU labels before the step lost 2 points (an
    outside attack): on a GPU that check waits for nothing. The checks cell and the
    student's kernel record it alike; what the model computed, put into the batch's
    tensors in any way, is still read."""
    checks = checks_of(submissions("gpu_training"))

    def arguments():  # afresh for each call: some ways change their batch
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 3)
        inputs, labels = torch.randn(8, 2), torch.randint(0, 3, (8,))
        batch = (inputs, labels) if way is _reads_a_batch_given_in_a_tuple else inputs
        return model, torch.optim.SGD(model.parameters(), lr=0.1), batch, labels

    got, given = [], arguments()
    with student_side.copy_record(got, given):
        way(*given)
    assert got == HOST_DATA[way]
    checks["train_step"] = way
    _, local = checks["call_recorded"]("train_step", *arguments())
    student["train_step"] = way
    checks["train_step"] = trusted_side.StudentFunction("train_step")
    _, remote = checks["call_recorded"]("train_step", *arguments())
    assert local == remote == HOST_DATA[way]


_ITEM = torch.Tensor.item  # as it was before any record's wrappers


def _trained_loss(model, optimizer):
    inputs, labels = torch.randn(8, 2), torch.randint(0, 3, (8,))
    loss = F.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def reads_the_loss_with_the_modes_off(model, optimizer):
    from torch.utils._python_dispatch import _disable_current_modes

    loss = _trained_loss(model, optimizer)
    with _disable_current_modes():
        _ITEM(loss)
    return loss.detach()


def reads_the_loss_with_the_python_key_off(model, optimizer):
    loss = _trained_loss(model, optimizer)
    with torch._C._DisableTorchDispatch():
        _ITEM(loss)
    return loss.detach()


def copies_float32_with_the_modes_off(images, device, mean, std):
    from torch.utils._python_dispatch import _disable_current_modes

    result = images.to(device).float()
    with _disable_current_modes():
        result.copy_((images.float() / 255).to(device))
    return result


def prints_and_trains(model, optimizer):
    """A right step that prints its host data and reads the loss it may: printing turns the
    modes off inside, and Adam reads its step count; neither is an op the call hid."""
    print(model[0].weight.detach().to("cpu"), f"{torch.arange(3)}")
    return _trained_loss(model, optimizer).detach()


def profiles_itself_and_loads_a_state_dict(model, optimizer):
    """A right step that profiles itself (its profiler takes the record's place on the
    thread for a while) and loads a state_dict with weights_only=False."""
    import io

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    model.load_state_dict(torch.load(buffer, weights_only=False))
    with torch.profiler.profile():
        loss = _trained_loss(model, optimizer)
    with torch.autograd.profiler.profile():
        loss = _trained_loss(model, optimizer)
    return loss.detach()


def profiles_itself_with_start_and_stop(model, optimizer):
    """A right step that starts and stops a profiler of its own (no ``with``)."""
    profiler = torch.profiler.profile()
    profiler.start()
    loss = _trained_loss(model, optimizer)
    profiler.stop()
    return loss.detach()


def _recorded(function, *args) -> list:
    record: list = []
    with student_side.copy_record(record, list(args)) as recording:
        result = function(*args)
    return record + recording.results(result)


def reads_the_loss_under_a_range_named_like_an_op(model, optimizer):
    from torch.utils._python_dispatch import _disable_current_modes

    loss = _trained_loss(model, optimizer)
    with torch.autograd.profiler.record_function("aten::log_step"), _disable_current_modes():
        _ITEM(loss)
    return loss.detach()


def reads_the_loss_after_profiling_itself(model, optimizer):
    from torch.utils._python_dispatch import _disable_current_modes

    with torch.profiler.profile():
        loss = _trained_loss(model, optimizer)
    with _disable_current_modes():
        _ITEM(loss)
    return loss.detach()


class _RunsCode:
    def __reduce__(self):
        return (print, ("code the file named ran",))


def reads_the_loss_inside_torch_load(model, optimizer):
    """Unpickling runs what the file names, inside the read torch.load is to the record."""
    import io

    loss = _trained_loss(model, optimizer)
    blob = io.BytesIO()
    torch.save(_RunsCode(), blob)
    blob.seek(0)
    torch.load(blob, weights_only=False)
    return loss.detach()


def reads_the_loss_after_a_profiler_that_never_started(model, optimizer):
    """Attack 43: the look stood aside for a profiler whose start raised, and never came
    back (no exit followed)."""
    from torch.utils._python_dispatch import _disable_current_modes

    try:
        torch.autograd.profiler.profile._prepare_trace(object())
    except Exception:  # noqa: BLE001 - the trick wants it to fail
        pass
    loss = _trained_loss(model, optimizer)
    with _disable_current_modes():
        _ITEM(loss)
    return loss.detach()


_DECLARED: list = []


def _read_declared():
    _DECLARED.append(_ITEM(_DECLARED[0]))
    return 0


class _CallsADeclaredFunction:
    def __reduce__(self):
        return (_read_declared, ())


def reads_the_loss_in_a_function_declared_safe_to_load(model, optimizer):
    """Attack 43: the weights-only unpickler calls what the notebook declared safe
    (``add_safe_globals``), inside the load."""
    import io

    loss = _trained_loss(model, optimizer)
    blob = io.BytesIO()
    torch.save(_CallsADeclaredFunction(), blob)
    blob.seek(0)
    _DECLARED[:] = [loss.detach()]
    with torch.serialization.safe_globals([_read_declared]):
        torch.load(blob)
    return loss.detach()


def _read_in_a_child(loss) -> bytes:
    """The loss read by a child of ``os.fork``, piped back."""
    import os

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write_end, repr(_ITEM(loss)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    value = os.read(read_end, 100)
    os.close(read_end)
    os.waitpid(pid, 0)
    return value


def reads_the_loss_in_a_forked_child(model, optimizer):
    """Attack 43: a child of ``os.fork`` reads the loss and pipes it back."""
    loss = _trained_loss(model, optimizer)
    _read_in_a_child(loss)
    return loss.detach()


def reads_the_loss_in_a_child_forked_by_an_earlier_thread(model, optimizer):
    """Attack 44: a thread started before the call forks; the child reads the loss."""
    import queue
    import threading

    asked, answered = queue.Queue(), queue.Queue()

    def logger():
        answered.put(_read_in_a_child(asked.get()))

    thread = threading.Thread(target=logger, daemon=True)
    thread.start()
    return thread, asked, answered


@pytest.mark.parametrize(
    "function, args",
    [
        (reads_the_loss_with_the_modes_off, ()),
        (reads_the_loss_with_the_python_key_off, ()),
        (copies_float32_with_the_modes_off, (IMAGES, "meta", MEAN, STD)),
        (copies_float32_with_the_modes_off, (IMAGES, "cpu", MEAN, STD)),
        (reads_the_loss_under_a_range_named_like_an_op, ()),
        (reads_the_loss_after_profiling_itself, ()),
        (reads_the_loss_inside_torch_load, ()),
        (reads_the_loss_after_a_profiler_that_never_started, ()),
        (reads_the_loss_in_a_function_declared_safe_to_load, ()),
        (reads_the_loss_in_a_forked_child, ()),
        ("forked-by-an-earlier-thread", ()),
    ],
    ids=[
        "modes-off",
        "python-key-off",
        "copy-on-meta",
        "copy-on-cpu",
        "range-named-like-an-op",
        "after-its-own-profiler",
        "code-run-by-torch-load",
        "after-a-profiler-that-never-started",
        "declared-safe-to-load",
        "in-a-forked-child",
        "in-a-child-of-an-earlier-thread",
    ],
)
def test_a_read_or_copy_with_the_dispatch_modes_switched_off_is_said_unseen(function, args):
    """PyTorch's profiler, on the call's thread, sees the ops the record's mode did not: the
    record ends with one UNSEEN entry (attack 41: a loss read every step, and float32
    copied over a result, with the modes off, earned the tests' points)."""
    if not args:
        model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        args = (model, torch.optim.Adam(model.parameters()))
    if function == "forked-by-an-earlier-thread":  # the thread starts before the call
        thread, asked, answered = reads_the_loss_in_a_child_forked_by_an_earlier_thread(*args)

        def function(model, optimizer):
            loss = _trained_loss(model, optimizer)
            asked.put(loss.detach())
            answered.get(timeout=30)
            return loss.detach()

    record = _recorded(function, *args)
    assert [e for e in record if e[0] == student_side.UNSEEN] == [
        [student_side.UNSEEN, "", "", "", "", 1]
    ]


@pytest.mark.parametrize("way", WAYS, ids=lambda way: way.__name__)
def test_right_and_wrong_calls_with_the_modes_on_leave_nothing_unseen(way):
    model = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    for function, args in [
        (way, (IMAGES, "meta", MEAN, STD)),
        (way, (IMAGES, "cpu", MEAN, STD)),
        (prints_and_trains, (model, torch.optim.Adam(model.parameters()))),
        (prints_and_trains, (model, torch.optim.SGD(model.parameters(), lr=0.1))),
        (profiles_itself_and_loads_a_state_dict, (model, torch.optim.Adam(model.parameters()))),
        (profiles_itself_with_start_and_stop, (model, torch.optim.Adam(model.parameters()))),
    ]:
        record = _recorded(function, *args)
        assert not [e for e in record if e[0] == student_side.UNSEEN], (function, record)


def test_a_record_that_says_it_missed_ops_withholds_the_tests_points_and_says_why(monkeypatch):
    record = [
        ["_to_copy", "cpu", "meta", "uint8", "uint8", N],
        [student_side.UNSEEN, "", "", "", "", 2],
    ]
    reply = protocol.dumps({"ok": 1.0, "args": [], "kwargs": [], "record": record})
    monkeypatch.setattr(trusted_side, "ask", lambda prompt: trusted_side.read_reply(reply))
    with pytest.raises(trusted_side.StudentAnswerError, match="cannot be known"):
        trusted_side.StudentFunction("train_step").recorded()


def test_a_returned_models_weights_say_which_copies_reached_them_and_a_decoy_is_not_one():
    """load_checkpoint returns the model: the record's result entries name the copies its
    weights came from, so a decoy copy of the right size reaches none (attack 41)."""
    import io

    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(2, 3).state_dict(), buffer)

    def loads(model, decoy):
        torch.zeros(9).to("meta") if decoy else None
        buffer.seek(0)
        if not decoy:
            model.load_state_dict(torch.load(buffer, map_location="meta"))
        return model

    for decoy in (False, True):
        record = _recorded(loads, torch.nn.Linear(2, 3).to("meta"), decoy)
        reached = {e[5] for e in record if e[0] == "result"}
        arrived = sum(record[i][5] for i in reached if record[i][1:3] == ["cpu", "meta"])
        assert arrived == (0 if decoy else 9), record


def test_a_read_in_a_thread_started_with_thread_is_the_calls():
    """``_thread.start_new_thread`` called in the call starts a thread the record follows
    (attack 42 read the loss in one, unseen by the mode and the profiler's look)."""
    import _thread

    def reads_in_a_raw_thread(loss):
        done = _thread.allocate_lock()
        done.acquire()

        def read():
            try:
                loss.clone().item()
            finally:
                done.release()

        _thread.start_new_thread(read, ())
        done.acquire()
        return loss.detach()

    loss = torch.randn(()).to("meta").requires_grad_()
    record = _recorded(reads_in_a_raw_thread, loss * 2)
    assert [e[2] for e in record if e[0] != "result"] == ["host"], record
    assert _thread.start_new_thread.__module__ == "_thread"  # put back as it was
