"""The training model behind the lesson and its widget: data, network, steps, reads, speed."""

import math

import pytest
import torch
import torch.nn.functional as F

from gpucourse.training import (
    GpuModel,
    ReadCost,
    Segment,
    Trainer,
    make_network,
    measure_reads,
    parameter_count,
    spirals,
    waits,
)


def test_spirals_are_the_same_anywhere_and_made_on_the_device_asked_for():
    inputs, labels = spirals()
    again, same_labels = spirals()
    assert inputs.shape == (3000, 2) and inputs.dtype == torch.float32
    assert labels.shape == (3000,) and labels.dtype == torch.int64
    assert torch.equal(inputs, again) and torch.equal(labels, same_labels)
    assert labels.bincount().tolist() == [1000, 1000, 1000]
    meta_inputs, meta_labels = spirals(device="meta")
    assert meta_inputs.device.type == meta_labels.device.type == "meta"
    with pytest.raises(ValueError, match="at least 2 classes"):
        spirals(classes=1)


def test_the_network_has_two_hidden_layers_and_the_stated_size():
    network = make_network()
    assert [type(m).__name__ for m in network] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert parameter_count(network) == (2 * 64 + 64) + (64 * 64 + 64) + (64 * 3 + 3) == 4547
    assert next(make_network(device="meta").parameters()).device.type == "meta"


@pytest.mark.parametrize(
    "steps, every, expected",
    [(1000, 1, 1000), (1000, 100, 10), (1000, 1000, 1), (999, 100, 9), (0, 5, 0)],
)
def test_waits_counts_one_per_read(steps, every, expected):
    assert waits(steps, every) == expected


def test_waits_refuses_nonsense():
    with pytest.raises(ValueError):
        waits(10, 0)


def test_reads_come_every_n_steps_and_hold_the_mean_loss_since_the_last_read():
    trainer = Trainer(read_every=5)
    # A twin trained by hand on the same batches gives the losses each read averages.
    model = make_network()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(20):
        index = torch.randint(0, 3000, (64,), generator=generator)
        loss = F.cross_entropy(model(trainer.inputs[index]), trainer.labels[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert trainer.run(steps=20) == 20
    assert [r.step for r in trainer.readings] == [5, 10, 15, 20]
    for reading, first in zip(trainer.readings, range(0, 20, 5)):
        assert reading.loss == pytest.approx(sum(losses[first : first + 5]) / 5, rel=1e-5)
    assert trainer.segment.reads == 4 and trainer.segment.steps == 20


def test_training_learns_the_spirals():
    trainer = Trainer()
    before = trainer.accuracy()
    trainer.run(steps=600)
    assert trainer.readings[-1].loss < trainer.readings[0].loss
    assert trainer.accuracy() > max(before, 0.8)
    assert trainer.model.training  # accuracy() puts it back in training mode


def test_run_stops_after_the_time_given_but_runs_at_least_one_step():
    trainer = Trainer()
    assert trainer.run(seconds=0) == 1
    done = trainer.run(seconds=0.05)
    assert 1 <= done and trainer.segment.seconds > 0.05
    assert trainer.run(steps=3, seconds=100) == 3
    with pytest.raises(ValueError, match="give steps, seconds or both"):
        trainer.run()


def test_a_new_setting_starts_a_new_segment_of_measured_speed():
    trainer = Trainer(read_every=10, batch_size=64)
    trainer.set_read_every(3)  # before any step: the empty segment is replaced
    assert len(trainer.segments) == 1 and trainer.segment.read_every == 3
    trainer.run(steps=30)
    trainer.set_batch_size(128)
    trainer.run(steps=6)
    trainer.set_batch_size(128)  # the same value: the same segment
    first, second = trainer.finished_segments()
    assert (first.read_every, first.batch_size, first.steps, first.reads) == (3, 64, 30, 10)
    assert (second.read_every, second.batch_size, second.steps) == (3, 128, 6)
    assert second.samples_per_s == pytest.approx(second.steps_per_s * 128)
    assert (
        "read every 3 steps, batch 128" in second.line()
        and "(measured over 6 steps)" in second.line()
    )
    with pytest.raises(ValueError):
        trainer.set_batch_size(0)


def test_segment_speeds():
    segment = Segment("cpu", 1, 32, steps=200, seconds=0.5, reads=200)
    assert segment.steps_per_s == 400 and segment.samples_per_s == 12_800
    assert segment.line().startswith(
        "cpu, read every step, batch 32: 400 steps/s, 12,800 samples/s"
    )
    assert Segment("cpu", 1, 32).steps_per_s == 0.0


def test_measure_reads_times_both_settings_on_this_machine():
    cost = measure_reads("cpu", steps=20, min_run_time=0.05)
    assert cost.often_steps_per_s > 0 and cost.rarely_steps_per_s > 0
    often, rarely = cost.lines()
    assert often.startswith("read every step: ") and "(measured on cpu, batch 64)" in often
    assert rarely.startswith("read every 100 steps: ")
    assert math.isclose(cost.slowdown, cost.rarely_steps_per_s / cost.often_steps_per_s)


@pytest.mark.parametrize(
    "often, rarely, says",
    [
        (1000, 1050, "was 5% slower (measured): little. On a CPU there is no queue"),
        (1000, 1000.1, "was as fast (under 0.5% apart) (measured): little."),
        (1000, 990, "was 1% faster (measured): little."),
        (1000, 1400, "was 40% slower (measured). On a CPU there is no queue"),
        (1000, 2500, "was 2.5 times slower (measured)."),
    ],
)
def test_the_cpu_explanation_follows_the_measurement(often, rarely, says):
    text = ReadCost("cpu", 64, 1, 100, often, rarely).explain()
    assert says in text
    if rarely / often >= 1.15:
        assert "other programs sharing this machine's cores" in text and "little" not in text
    # Nothing about a GPU is said as if measured: it names the modelled mode instead.
    assert "No GPU here, so nothing was measured on one." in text and "much more" not in text
    assert 'The widget\'s "modelled GPU" mode shows it, with made-up times.' in text


def test_the_gpu_explanation_names_the_wait():
    text = ReadCost("cuda", 64, 1, 100, 1000, 3000).explain()
    assert text.startswith("On this GPU, reading every step was 3.0 times slower (measured).")
    assert "the CPU wait" in text


@pytest.mark.gpu
def test_on_a_gpu_the_trainer_and_the_measurement_run_there():
    trainer = Trainer(device="cuda")
    trainer.run(steps=50)
    assert next(trainer.model.parameters()).device.type == "cuda"
    assert trainer.inputs.device.type == "cuda"  # batches are picked on the device
    assert trainer.readings[-1].step == 50
    cost = measure_reads("cuda", steps=20, min_run_time=0.05)
    assert "(measured on cuda, batch 64)" in cost.lines()[0]
    assert cost.explain().startswith("On this GPU, reading every step was")


def test_on_the_cpu_steps_run_on_one_thread_and_the_setting_is_put_back(monkeypatch):
    seen = []
    trainer = Trainer()
    original = trainer._one_step
    monkeypatch.setattr(
        trainer,
        "_one_step",
        lambda segment: (seen.append(torch.get_num_threads()), original(segment)),
    )
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trainer.run(steps=3)
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _simulated_ms_per_step(model, read_every, batch, steps=600):
    """The queue played out step by step: the CPU queues each step, the GPU runs the steps in
    order as soon as they are queued, and a read waits for the GPU, then copies the loss."""
    cpu = gpu_free = 0.0
    for step in range(1, steps + 1):
        cpu += model.queue_ms
        gpu_free = max(cpu, gpu_free) + model.gpu_ms(batch)
        if read_every and step % read_every == 0:
            cpu = max(cpu, gpu_free) + model.read_ms
    return max(cpu, gpu_free) / steps


@pytest.mark.parametrize(
    "model",
    [
        GpuModel(),
        GpuModel(queue_ms=0.1, gpu_fixed_ms=0.4),
        GpuModel(queue_ms=0.3, gpu_fixed_ms=0.3, read_ms=0.0),
    ],
)
@pytest.mark.parametrize("read_every", [1, 3, 10, 100])
@pytest.mark.parametrize("batch", [8, 64, 512, 1024])
def test_the_gpu_model_is_the_queue_played_out(model, read_every, batch):
    assert math.isclose(
        model.ms_per_step(read_every, batch),
        _simulated_ms_per_step(model, read_every, batch),
        rel_tol=1e-9,
    )


def test_the_gpu_model_reads_cost_most_when_cpu_and_gpu_take_as_long():
    model = GpuModel(queue_ms=0.5, gpu_fixed_ms=0.05, gpu_per_sample_ms=0.001, read_ms=0.02)
    assert model.gpu_ms(64) == pytest.approx(0.114)
    assert model.ms_per_step(None, 64) == 0.5  # never read: the CPU sets the pace
    assert model.ms_per_step(1, 64) == pytest.approx(
        0.5 + 0.114 + 0.02
    )  # each read drains the queue
    assert model.ms_per_step(100, 64) == pytest.approx((100 * 0.5 + 0.114 + 0.02) / 100)
    assert model.ms_per_step(100, 1024) == pytest.approx(
        (0.5 + 100 * 1.074 + 0.02) / 100
    )  # GPU-bound
    assert model.slowdown(1, 64) == pytest.approx(1.2647, abs=1e-4)
    assert model.slowdown(1, 512) == pytest.approx(1.9076, abs=1e-4)
    assert model.slowdown(1, 512) > model.slowdown(1, 64) and model.slowdown(
        1, 512
    ) > model.slowdown(1, 8)
    assert model.gpu_busy(1, 64) == pytest.approx(0.114 / 0.634)
    assert model.steps_per_s(1, 64) == pytest.approx(1000 / 0.634)


def test_the_gpu_model_says_it_is_made_up_and_refuses_nonsense():
    text = GpuModel().sentence(1, 64)
    assert text.startswith(
        "modelled GPU, read every step, batch 64: 1,577 steps/s, GPU busy 18%; "
        "every 100 steps: 1,995 steps/s, GPU busy 23%; 1.26 times slower"
    )
    assert text.endswith(
        "(made-up times: the CPU queues a step in 0.5 ms; the GPU runs it in 0.114 ms "
        "for a batch of 64; a read copies the loss back in 0.02 ms; not a measurement)"
    )
    for bad in [
        {"queue_ms": -1},
        {"read_ms": float("nan")},
        {"gpu_fixed_ms": True},
        {"queue_ms": 0, "gpu_fixed_ms": 0},
    ]:
        with pytest.raises(ValueError):
            GpuModel(**bad)
    with pytest.raises(ValueError):
        GpuModel().ms_per_step(0, 64)
    with pytest.raises(ValueError):
        GpuModel().gpu_ms(0)
