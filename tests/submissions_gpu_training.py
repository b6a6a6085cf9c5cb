"""Realistic submissions of the gpu_training exercises, built from the committed release.

The API is every unit's: see tests/submission_kit.py (tests/units.py finds this module).
"""

from __future__ import annotations

from tests import submission_kit as kit

ASSIGNMENT = "gpu_training"

# The answers to the Check yourself questions, as they would be printed. None of them may
# appear in the release, in a visible test, or in a failure message. (The waits, 1,000, 10
# and 1, are numbers the questions themselves state, so they cannot be told apart here.)
ANSWER_VALUES: tuple[str, ...] = ("400", "200", "300", "400.0", "200.0", "300.0")


ROOT = kit.ROOT
without_cell, with_cell_source = kit.without_cell, kit.with_cell_source
SOURCE, RELEASE, SOLUTIONS, POINTS, TOTAL, Mistake, answer_values_in = kit.unit(
    ASSIGNMENT, ANSWER_VALUES, __name__
)


def _train_step(*body: str) -> str:
    return "def train_step(model, optimizer, inputs, labels):\n" + "\n".join(
        f"    {line}" for line in body
    )


def _load_checkpoint(*body: str) -> str:
    return "def load_checkpoint(model, buffer):\n" + "\n".join(f"    {line}" for line in body)


def _training_memory(copies: str, size: str = "p.element_size()") -> str:
    return (
        "def training_memory_mb(model, optimizer):\n"
        f"    copies = {copies}\n"
        f"    return sum(p.numel() * {size} for p in model.parameters()) * copies / 10**6"
    )


WHERE = "device = next(model.parameters()).device"
# The solution's step up to its return: what most train_step mistakes add to or end with.
STEP = (
    WHERE,
    "loss = F.cross_entropy(model(inputs.to(device)), labels.to(device).long())",
    "optimizer.zero_grad()",
    "loss.backward()",
    "optimizer.step()",
)
ADAM_IS_4 = (
    "4 if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)) "
    "else 3 if optimizer.defaults.get('momentum', 0) else 2"
)

MISTAKES: dict[str, Mistake] = {
    "mib": Mistake(
        "megabytes counted as MiB (2**20 bytes), 381.5 MB for Adam",
        {
            "q1_memory": (
                "adam_mb = 25_000_000 * 4 * 4 / 2**20\nsgd_mb = 25_000_000 * 4 * 2 / 2**20\n"
                "sgd_momentum_mb = 25_000_000 * 4 * 3 / 2**20"
            ),
            "q1_training_memory": _training_memory(ADAM_IS_4).replace("10**6", "2**20"),
        },
        ("test_q1_adam", "test_q1_sgd", "test_q1_training_memory"),
        "that is in MiB",
    ),
    "four_bytes_forgotten": Mistake(
        "one byte a number: 100, 50 and 75 MB",
        {
            "q1_memory": (
                "adam_mb = 25_000_000 * 4 / 10**6\nsgd_mb = 25_000_000 * 2 / 10**6\n"
                "sgd_momentum_mb = 25_000_000 * 3 / 10**6"
            )
        },
        ("test_q1_adam", "test_q1_sgd"),
        "at 4 bytes a float32 number",
    ),
    "adam_as_three": Mistake(
        "Adam counted as 3 copies, like SGD with momentum",
        {
            "q1_memory": (
                "adam_mb = 25_000_000 * 4 * 3 / 10**6\nsgd_mb = 25_000_000 * 4 * 2 / 10**6\n"
                "sgd_momentum_mb = 25_000_000 * 4 * 3 / 10**6"
            ),
            "q1_training_memory": _training_memory(
                "3 if isinstance(optimizer, torch.optim.Adam) "
                "or optimizer.defaults.get('momentum', 0) else 2"
            ),
        },
        ("test_q1_adam", "test_q1_training_memory"),
        "Adam keeps two numbers per parameter",
    ),
    "momentum_forgotten": Mistake(
        "SGD with momentum counted like plain SGD: no momentum buffer",
        {
            "q1_memory": (
                "adam_mb = 25_000_000 * 4 * 4 / 10**6\nsgd_mb = 25_000_000 * 4 * 2 / 10**6\n"
                "sgd_momentum_mb = 25_000_000 * 4 * 2 / 10**6"
            ),
            "q1_training_memory": _training_memory(
                "4 if isinstance(optimizer, torch.optim.Adam) else 2"
            ),
        },
        ("test_q1_sgd", "test_q1_training_memory"),
        "keeps a momentum buffer",
    ),
    "momentum_only_at_0_9": Mistake(
        "training_memory_mb counts a momentum buffer only for the example's momentum, 0.9 "
        "(review 58: no other momentum was tested)",
        {
            "q1_training_memory": _training_memory(
                "4 if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)) "
                "else 3 if optimizer.defaults.get('momentum', 0) == 0.9 else 2"
            )
        },
        ("test_q1_training_memory",),
        "keeps a momentum buffer per parameter",
    ),
    "memory_ignores_dtype": Mistake(
        "training_memory_mb counts 4 bytes a number whatever the dtype",
        {"q1_training_memory": _training_memory(ADAM_IS_4, size="4")},
        ("test_q1_training_memory",),
        "use p.element_size()",
    ),
    "final_read_twice": Mistake(
        "the read at the end counted on top of the last one: 11 and 2",
        {"q2_waits": "waits_every_step = 1000\nwaits_every_100 = 11\nwaits_read_once = 2"},
        ("test_q2_waits_reading", "test_q2_waits_once"),
        "counts the final read twice",
    ),
    "counts_a_hair_off": Mistake(
        "counts of waits a hair off a whole number (an outside attack: 1000.0009, 10.000009 and "
        "1.0000009 were within the hidden tests' relative 1e-6)",
        {
            "q2_waits": (
                "waits_every_step = 1000.0009\nwaits_every_100 = 10.000009\n"
                "waits_read_once = 1.0000009"
            )
        },
        ("test_q2_waits_form", "test_q2_waits_reading", "test_q2_waits_once"),
        "should be a whole number of waits",
    ),
    "running_total_never_waits": Mistake(
        "a running total read once at the end is thought to wait for nothing",
        {"q2_waits": "waits_every_step = 1000\nwaits_every_100 = 10\nwaits_read_once = 0"},
        ("test_q2_waits_once",),
        "reading it at the end does",
    ),
    "assigns_the_model": Mistake(
        "the model's line must be assigned back",
        {"q3_must_assign": "must_assign = 'A'"},
        ("test_q3_must_assign",),
        "moves the parameters in place",
    ),
    "reads_the_loss": Mistake(
        "train_step returns loss.item(): a Python float, read on the host",
        {
            "q4_train_step": _train_step(
                *STEP,
                "return loss.item()",
            )
        },
        (
            "test_q4_train_step_form",
            "test_q4_device",
            "test_q4_labels",
            "test_q4_reference_step",
            "test_q4_stays_on_device",
        ),
        "should be a tensor, not a float",
    ),
    "batch_not_moved": Mistake(
        "train_step leaves the batch where it came from (the device error)",
        {
            "q4_train_step": _train_step(
                "loss = F.cross_entropy(model(inputs), labels.long())",
                "optimizer.zero_grad()",
                "loss.backward()",
                "optimizer.step()",
                "return loss.detach()",
            )
        },
        ("test_q4_device", "test_q4_stays_on_device"),
        "move the batch (inputs and labels) to the device",
    ),
    "float_labels": Mistake(
        "train_step keeps the labels' own dtype (the dtype error)",
        {
            "q4_train_step": _train_step(
                WHERE,
                "loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))",
                "optimizer.zero_grad()",
                "loss.backward()",
                "optimizer.step()",
                "return loss.detach()",
            )
        },
        ("test_q4_labels",),
        "class numbers must be int64",
    ),
    "no_zero_grad": Mistake(
        "train_step never zeroes the gradients: they add up from step to step",
        {
            "q4_train_step": _train_step(
                WHERE,
                "loss = F.cross_entropy(model(inputs.to(device)), labels.to(device).long())",
                "loss.backward()",
                "optimizer.step()",
                "return loss.detach()",
            )
        },
        ("test_q4_reference_step",),
        "call optimizer.zero_grad() before backward()",
    ),
    "climbs_the_loss": Mistake(
        "train_step calls backward() on the negated loss: each step climbs the loss it returns "
        "(an outside attack: only the reference step failed it)",
        {
            "q4_train_step": _train_step(
                WHERE,
                "loss = F.cross_entropy(model(inputs.to(device)), labels.to(device).long())",
                "optimizer.zero_grad()",
                "(-loss).backward()",
                "optimizer.step()",
                "return loss.detach()",
            )
        },
        ("test_q4_device", "test_q4_reference_step", "test_q4_stays_on_device"),
        "did not lower the loss of the batch",
    ),
    "overshoots": Mistake(
        "train_step takes the right step, then fifty more of plain gradient descent with "
        "lr=1 at once: the weights move downhill, far past the minimum (outside attack 76)",
        {
            "q4_train_step": _train_step(
                *STEP,
                "with torch.no_grad():",
                "    for p in model.parameters():",
                "        p -= 50 * p.grad",
                "return loss.detach()",
            )
        },
        ("test_q4_device", "test_q4_reference_step", "test_q4_stays_on_device"),
        "did not lower the loss of the batch",
    ),
    "returns_the_summed_loss": Mistake(
        "train_step steps on the mean loss and returns the sum of the batch's losses (review 75: "
        "the labels test told it to convert its labels, which it did)",
        {
            "q4_train_step": _train_step(
                *STEP,
                "return F.cross_entropy(model(inputs.to(device)), labels.to(device).long(), reduction='sum').detach()",
            )
        },
        ("test_q4_labels", "test_q4_reference_step", "test_q4_stays_on_device"),
        "as with int64 ones",
    ),
    "not_detached": Mistake(
        "train_step returns the loss still attached to its graph",
        {
            "q4_train_step": _train_step(
                *STEP,
                "return loss",
            )
        },
        ("test_q4_stays_on_device",),
        "return loss.detach()",
    ),
    "never_trains": Mistake(
        "train_step returns a zero loss on the model's device and never trains (issue 17)",
        {
            "q4_train_step": _train_step(
                "return torch.zeros((), device=next(model.parameters()).device)"
            )
        },
        ("test_q4_device", "test_q4_labels", "test_q4_reference_step", "test_q4_stays_on_device"),
        "the model's weights did not change",
    ),
    "steps_on_zero_gradients": Mistake(
        "train_step computes no loss: it gives every weight a zero gradient, takes the "
        "optimizer's step and returns a zero loss (an outside attack)",
        {
            "q4_train_step": _train_step(
                WHERE,
                "for p in model.parameters():",
                "    p.grad = torch.zeros_like(p)",
                "optimizer.step()",
                "return torch.zeros((), device=device)",
            )
        },
        ("test_q4_device", "test_q4_labels", "test_q4_reference_step", "test_q4_stays_on_device"),
        "the weights did not change",
    ),
    "returns_an_empty_loss": Mistake(
        "train_step steps right and returns torch.empty(0), which any loss is allclose to "
        "(a thirteenth outside attack)",
        {
            "q4_train_step": _train_step(
                *STEP,
                "return torch.empty(0, device=device)",
            )
        },
        (
            "test_q4_reference_step",
            "test_q4_train_step_form",
            "test_q4_labels",
            "test_q4_stays_on_device",
        ),
        "not the mean cross-entropy",
    ),
    "reads_off_meta": Mistake(
        "train_step prints loss.item() every step, and on meta (where no value can be read) "
        "skips the step to hide it (an outside attack). On meta the device test asks only "
        "where the loss comes back (a right step through torch.compile gets no gradients "
        "there): skipping there is not seen, the read is",
        {
            "q4_train_step": _train_step(
                WHERE,
                "if device.type == 'meta':",
                "    return torch.empty((), device='meta')",
                "loss = F.cross_entropy(model(inputs.to(device)), labels.to(device).long())",
                "optimizer.zero_grad()",
                "loss.backward()",
                "optimizer.step()",
                "print(f'loss {loss.item():.3f}')",
                "return loss.detach()",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "prints_the_loss": Mistake(
        "train_step prints the loss tensor every step (printing reads its value on the host, "
        "and turns PyTorch's dispatch modes off while it formats; an outside attack)",
        {
            "q4_train_step": _train_step(
                *STEP,
                "print('loss', loss)",
                "return loss.detach()",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "saves_every_step": Mistake(
        "train_step saves a checkpoint of the model and the loss every step (on a GPU, a copy "
        "of every tensor to the host; an outside attack)",
        {
            "q4_train_step": _train_step(
                *STEP,
                "torch.save({'model': model.state_dict(), 'loss': loss.detach()}, io.BytesIO())",
                "return loss.detach()",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "logs_from_a_thread": Mistake(
        "train_step reads the loss with .item() in a background thread every step (an "
        "outside attack)",
        {
            "q4_train_step": "from concurrent.futures import ThreadPoolExecutor\n"
            "_logger = ThreadPoolExecutor(1)\n\n\n"
            + _train_step(
                *STEP,
                "_logger.submit(lambda l: print('loss', l.item()), loss.detach())",
                "return loss.detach()",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "saves_a_loss_history": Mistake(
        "train_step keeps every loss in a deque and saves it every step (torch.save reads "
        "each tensor; an outside attack)",
        {
            "q4_train_step": "import collections\n_history = collections.deque(maxlen=100)\n\n\n"
            + _train_step(
                *STEP,
                "_history.append(loss.detach())",
                "torch.save(_history, io.BytesIO())",
                "return loss.detach()",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "keeps_the_best_loss_with_equal": Mistake(
        "train_step compares each loss with the best so far by torch.equal, a bool made on the "
        "host from the values (a sixth outside attack)",
        {
            "q4_train_step": "_best = {}\n\n\n"
            + _train_step(
                *STEP,
                "loss = loss.detach()",
                "if loss.device.type != 'meta':  # meta has no values to compare",
                "    if 'loss' not in _best or torch.equal(torch.minimum(loss, _best['loss']), loss):",
                "        _best['loss'] = loss",
                "return loss",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "reads_the_loss_through_dlpack": Mistake(
        "train_step keeps a history of float(np.from_dlpack(loss)), a read on the host through "
        "DLPack (a sixth outside attack)",
        {
            "q4_train_step": "import numpy as np\n_history = []\n\n\n"
            + _train_step(
                *STEP,
                "loss = loss.detach()",
                "if loss.device.type == 'cpu':",
                "    _history.append(float(np.from_dlpack(loss)))",
                "return loss",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "waits_for_a_logger": Mistake(
        "train_step hands the loss to a logging thread started earlier, which reads it with "
        ".item(), and waits until it has (an outside attack)",
        {
            "q4_train_step": "import queue, threading\n_to_log = queue.Queue()\n\n\n"
            "def _logger():\n"
            "    while True:\n"
            "        loss = _to_log.get()\n"
            "        try:\n"
            "            loss.item()\n"
            "        except RuntimeError:\n"
            "            pass  # a meta tensor has nothing to read\n"
            "        _to_log.task_done()\n\n\n"
            "threading.Thread(target=_logger, daemon=True).start()\n\n\n"
            + _train_step(
                *STEP,
                "_to_log.put(loss.detach())",
                "_to_log.join()",
                "return loss.detach()",
            )
        },
        ("test_q4_stays_on_device",),
        "read a value on the host",
    ),
    "hardcodes_cuda": Mistake(
        'train_step writes "cuda" instead of reading the model\'s device (no GPU here)',
        {
            "q4_train_step": _train_step(
                "loss = F.cross_entropy(model(inputs.to('cuda')), labels.to('cuda').long())",
                "optimizer.zero_grad()",
                "loss.backward()",
                "optimizer.step()",
                "return loss.detach()",
            )
        },
        (
            "test_q4_train_step_form",
            "test_q4_device",
            "test_q4_labels",
            "test_q4_reference_step",
            "test_q4_stays_on_device",
        ),
        "this computer has none",
    ),
    "loads_nothing": Mistake(
        "load_checkpoint returns the model it was given and loads nothing (an outside attack)",
        {"q5_load_checkpoint": _load_checkpoint("return model")},
        ("test_q5_values", "test_q5_saved_on_gpu", "test_q5_devices"),
        "the model's weights are not the saved ones",
    ),
    "loads_but_never_into_the_model": Mistake(
        "load_checkpoint loads the checkpoint onto the model's device and forgets "
        "load_state_dict (an outside attack)",
        {
            "q5_load_checkpoint": _load_checkpoint(
                "state = torch.load(buffer, map_location=next(model.parameters()).device)",
                "return model",
            )
        },
        ("test_q5_values", "test_q5_saved_on_gpu", "test_q5_devices"),
        "the model's weights are not the saved ones",
    ),
    "a_decoy_copy_on_meta": Mistake(
        "load_checkpoint loads nothing on meta and makes a one-number copy there instead "
        "(a thirteenth outside attack)",
        {
            "q5_load_checkpoint": _load_checkpoint(
                "device = next(model.parameters()).device",
                "if device.type == 'meta':",
                "    torch.zeros(1).to(device)",
                "    return model",
                "model.load_state_dict(torch.load(buffer, map_location=device))",
                "return model",
            )
        },
        ("test_q5_devices",),
        "nothing of the checkpoint reached the model",
    ),
    "no_map_location": Mistake(
        "load_checkpoint calls torch.load without map_location",
        {
            "q5_load_checkpoint": _load_checkpoint(
                "model.load_state_dict(torch.load(buffer))", "return model"
            )
        },
        ("test_q5_saved_on_gpu",),
        "map_location",
    ),
    "assigns_cpu_tensors": Mistake(
        "load_checkpoint loads onto the CPU and assigns the tensors: the model leaves its device",
        {
            "q5_load_checkpoint": _load_checkpoint(
                "model.load_state_dict(torch.load(buffer, map_location='cpu'), assign=True)",
                "return model",
            )
        },
        ("test_q5_devices",),
        "without assign=True",
    ),
}

# Other right ways to answer: each earns every point.
FULL_MARKS: dict[str, dict[str, str]] = {
    "other_right_answers": {
        **SOLUTIONS,
        # Whole MB as ints, typed or made by Python's exact arithmetic: exact (a fresh
        # review's right answers had lost the visible test's point).
        "q1_memory": "adam_mb = 25_000_000 * 4 * 4 // 10**6\nsgd_mb = 200\nsgd_momentum_mb = 3e2",
        # Adam's step counters counted too (one float32 number per parameter tensor): the
        # question accepts both.
        "q1_training_memory": (
            "def training_memory_mb(model, optimizer):\n"
            "    params = list(model.parameters())\n"
            "    size = sum(p.numel() * p.element_size() for p in params)\n"
            "    if isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):\n"
            "        return (4 * size + 4 * len(params)) / 1e6\n"
            "    return (3 if optimizer.defaults.get('momentum', 0) else 2) * size / 1e6"
        ),
        # Counts as a float and a NumPy integer (the hidden tests are exact: 1000.0 is 1000).
        "q2_waits": "waits_every_step = 1000.0\nwaits_every_100 = np.int64(1000) // 100\nwaits_read_once = 1",
        "q3_must_assign": "must_assign = ' b '",
        # Labels checked where they arrived, before the step (on a GPU that waits for
        # nothing: an outside attack's right answer lost 2 points to it), then moved and
        # converted in one call; the loss from the nn.Module form.
        "q4_train_step": _train_step(
            "if (labels < 0).any() or (labels != labels.round()).any():",
            "    raise ValueError('labels must be whole class numbers')",
            "where = next(model.parameters()).device",
            "criterion = torch.nn.CrossEntropyLoss()",
            "loss = criterion(model(inputs.to(where)), labels.to(where, torch.long))",
            "optimizer.zero_grad(set_to_none=True)",
            "loss.backward()",
            "optimizer.step()",
            "return loss.detach()",
        ),
        # Loaded onto the CPU, then copied into the model wherever it is.
        "q5_load_checkpoint": _load_checkpoint(
            "state = torch.load(buffer, map_location='cpu', weights_only=True)",
            "model.load_state_dict(state)",
            "return model",
        ),
    },
}

# The loss computed by a function compiled with torch.compile: on meta a compiled graph
# gets no gradients (no autograd kernel there), so the device test once took 1 point from
# this right step for the optimizer's missing state on meta (outside attack 42, t4.compile).
FULL_MARKS["compiled_loss"] = {
    **SOLUTIONS,
    # And training_memory_mb rounded to 3 significant figures, as the precision rule allows
    # (review 67: 8.01 for 8.008 MB had lost the hidden test's 3 points).
    "q1_training_memory": _training_memory(ADAM_IS_4).replace("    return sum(", "    mb = sum(")
    + "\n    return float(f'{mb:.3g}')",
    "q4_train_step": (
        "_loss = torch.compile(lambda m, x, y: F.cross_entropy(m(x), y), backend='aot_eager')\n"
        + _train_step(
            WHERE,
            "loss = _loss(model, inputs.to(device), labels.to(device).long())",
            "optimizer.zero_grad()",
            "loss.backward()",
            "optimizer.step()",
            "return loss.detach()",
        )
    ),
}

# Every name the checks and tests use (numbers, math, np, torch, F, check...) is the learner's.
FULL_MARKS["rebinds_every_public_name"] = kit.rebinding_every_public_name(SOLUTIONS, SOURCE)


def _always_equal(number: str, text: str, tensor: str, model: str) -> dict[str, str]:
    return {
        "q1_memory": kit.LIARS + f"\nadam_mb = sgd_mb = sgd_momentum_mb = {number}",
        "q1_training_memory": f"def training_memory_mb(model, optimizer):\n    return {number}",
        "q2_waits": f"waits_every_step = waits_every_100 = waits_read_once = {number}",
        "q3_must_assign": f"must_assign = {text}",
        "q4_train_step": _train_step(f"return {tensor}"),
        "q5_load_checkpoint": _load_checkpoint(f"return {model}"),
    }


ALWAYS_EQUAL: dict[str, dict[str, str]] = {
    # Each answer a subclass of its own type.
    "always_equal_subclasses": _always_equal(
        "LyingInt()", "LyingStr()", "torch.zeros(()).as_subclass(LyingTensor)", "Anything()"
    ),
    # Every answer, and every function's result, one object whose __eq__ returns True.
    "always_equal_objects": _always_equal("Anything()", "Anything()", "Anything()", "Anything()"),
}
ALWAYS_EQUAL_MAX = 0.1 * TOTAL

# One implausible answer per answer cell: each visible test must refuse it with a message.
IMPLAUSIBLE: dict[str, str] = {
    "q1_memory": "adam_mb = '400 MB'\nsgd_mb = 0.2\nsgd_momentum_mb = 300_000_000",
    "q1_training_memory": "def training_memory_mb(model, optimizer):\n    return 1.0",
    "q2_waits": "waits_every_step = 1000.5\nwaits_every_100 = -1\nwaits_read_once = '1'",
    "q3_must_assign": "must_assign = 'batch'",
    "q4_train_step": _train_step("return [0.5]"),
    "q5_load_checkpoint": _load_checkpoint("return model.state_dict()"),
}

# The mistakes that course-grade's own test grades for this unit (tests/course/test_course_grade_units.py):
# a handful, chosen for what they send across its bridge between the two kernels.
COURSE_GRADE_SAMPLE = (
    "no_zero_grad",
    "no_map_location",
    "reads_the_loss",
    "never_trains",
    "reads_off_meta",
    "prints_the_loss",
    "logs_from_a_thread",
    "waits_for_a_logger",
    "keeps_the_best_loss_with_equal",
    "counts_a_hair_off",  # a count a hair off a whole number (outside attack 63)
    "climbs_the_loss",  # outside attack 74: the weights cross back, and which way they moved tells
    "returns_the_summed_loss",  # review 75: the labels test calls the step again, on a twin
)

# Tampered submissions: a learner with a mistake who also tries to dodge the failing test,
# by deleting it, or by replacing test cells with `pass`.
DELETED = ("deleted_test_cell", "no_map_location", "test_q5_saved_on_gpu")
PASSED = ("pass_in_test_cells", "mib", ("test_q1_adam", "test_q1_sgd", "test_q1_training_memory"))


make_submission, expected_score = kit.unit_functions(RELEASE, SOLUTIONS, TOTAL)


FULL_MARKS["modules_that_do_the_work"] = {
    # A twelfth outside attack's right answers: callable nn.Modules whose forward is the
    # step and the load (course-grade had sent each as a model, without its forward).
    **SOLUTIONS,
    "q4_train_step": (
        "class TrainStep(torch.nn.Module):\n"
        "    def forward(self, model, optimizer, inputs, labels):\n"
        "        device = next(model.parameters()).device\n"
        "        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device, torch.int64))\n"
        "        optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        return loss.detach()\n\n\n"
        "train_step = TrainStep()"
    ),
    "q5_load_checkpoint": (
        "class LoadCheckpoint(torch.nn.Module):\n"
        "    def forward(self, model, buffer):\n"
        "        device = next(model.parameters()).device\n"
        "        model.load_state_dict(torch.load(buffer, map_location=device))\n"
        "        return model\n\n\n"
        "load_checkpoint = LoadCheckpoint()"
    ),
}
