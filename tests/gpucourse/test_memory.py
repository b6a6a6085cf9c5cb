"""What training costs in memory: the copies each optimizer keeps, counted from real tensors."""

import pytest
import torch

from gpucourse.memory import copies, count, one_step, peak_memory, step_memory, training_mb
from gpucourse.training import make_network, spirals

OPTIMIZERS = [
    ("SGD", lambda p: torch.optim.SGD(p, lr=0.1), 2),
    ("SGD with momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 3),
    ("Adam", lambda p: torch.optim.Adam(p), 4),
    ("AdamW", lambda p: torch.optim.AdamW(p), 4),
    ("Adam with amsgrad", lambda p: torch.optim.Adam(p, amsgrad=True), 5),
    ("RMSprop", lambda p: torch.optim.RMSprop(p), 3),
    ("Adagrad", lambda p: torch.optim.Adagrad(p), 3),
]


@pytest.mark.parametrize("name, make, expected", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_the_rule_matches_the_tensors_the_optimizer_really_keeps(name, make, expected):
    model = make_network()
    optimizer = make(model.parameters())
    assert copies(optimizer) == expected
    inputs, labels = spirals(points=60)
    one_step(model, optimizer, inputs, labels)
    counted = count(model, optimizer)
    assert counted.gradients == counted.weights
    assert (counted.weights + counted.gradients + counted.state) == expected * counted.weights


def test_a_rule_it_does_not_know_is_a_clear_error():
    model = make_network()
    with pytest.raises(ValueError, match="no rule for LBFGS"):
        copies(torch.optim.LBFGS(model.parameters()))


def test_training_mb_in_megabytes_of_a_million_bytes():
    assert training_mb(25_000_000, 4) == 400
    assert training_mb(1_000_000, 2, bytes_per_number=2) == 4


def test_counted_lines_say_where_the_figures_come_from():
    model = make_network()
    optimizer = torch.optim.Adam(model.parameters())
    one_step(model, optimizer, *spirals(points=30))
    lines = count(model, optimizer).lines()
    assert lines[0] == f"weights: {4547 * 4:,} bytes"
    assert "step counters" in lines[2]
    assert (
        lines[-1].endswith("(counted from the tensors)") and "4.00 times the weights" in lines[-1]
    )


def test_without_a_gpu_step_memory_counts_and_says_it_asked_no_allocator():
    memory = step_memory("cpu", hidden=32, batch_size=96)
    assert memory.before is None and memory.counted.total > 0
    text = "\n".join(memory.lines())
    assert "counted from the tensors" in text and "No GPU here" in text and "measured" not in text
    assert peak_memory("cpu").startswith("No GPU here")


@pytest.mark.gpu
def test_on_a_gpu_step_memory_reads_the_allocator_at_each_stage():
    memory = step_memory("cuda")
    assert memory.after_model > memory.before
    assert memory.after_forward > memory.after_model  # the saved activations
    assert memory.after_step > memory.after_backward  # Adam's state
    weights = memory.after_model - memory.before
    assert weights == pytest.approx(memory.counted.weights, rel=0.01)
    assert (memory.after_step - memory.before) == pytest.approx(
        memory.counted.total - memory.counted.counters, rel=0.02
    )
    text = "\n".join(memory.lines())
    assert "(measured)" in text and "counted from the tensors" in text
    assert "peak" in peak_memory("cuda") and "(measured)" in peak_memory("cuda")
