"""The training widget, driven from Python as a front end would drive it."""

import asyncio

import ipywidgets
import pytest

from gpucourse.training_widget import BATCH_SIZES, TrainingWidget
from gpucourse.widget_access import NAME_SLIDERS_JS, SLIDER_CLASS


def test_starts_idle_with_both_sliders_and_an_empty_curve():
    widget = TrainingWidget()
    assert widget.status_text == (
        "Press Train to train on cpu, reading the loss every 10 steps, in batches of 64."
    )
    assert widget.read_every.description == "Read the loss every N steps"
    assert widget.read_every.value == 10 and (widget.read_every.min, widget.read_every.max) == (
        1,
        100,
    )
    assert widget.batch.description == "Batch size" and list(widget.batch.options) == list(
        BATCH_SIZES
    )
    assert widget.run.description == "Train" and not widget.run.disabled
    assert widget.stop.description == "Stop" and widget.stop.disabled
    assert "no read of the loss yet" in widget.curve.value and widget.speeds.value == ""


def test_the_modelled_gpu_mode_shows_the_model_labelled_and_never_beside_a_measurement():
    from gpucourse.training import GpuModel

    widget = TrainingWidget()
    assert widget.mode.value == "measured" and widget.modelled_text == ""
    assert widget.modelled.layout.display == "none" and widget.speeds.layout.display is None
    assert [label for label, _ in widget.mode.options] == [
        "measured here (cpu)",
        "modelled GPU (made-up times)",
    ]
    assert (
        "training-mode" in widget.mode._dom_classes
        and "training-modelled" in widget.modelled._dom_classes
    )
    widget.mode.value = "modelled"
    assert widget.modelled.layout.display is None and widget.speeds.layout.display == "none"
    assert widget.modelled_text == GpuModel().sentence(10, 64)
    assert widget.modelled.value.startswith(
        '<div role="status"><b>Modelled, not measured:</b> modelled GPU,'
    )
    assert "made-up times" in widget.modelled_text and "not a measurement" in widget.modelled_text
    widget.read_every.value, widget.batch.value = 1, 512  # the sliders drive the model at once
    assert widget.modelled_text == GpuModel().sentence(1, 512)
    assert "1.91 times slower" in widget.modelled_text
    widget.mode.value = "measured"
    assert widget.modelled.value == "" and widget.modelled.layout.display == "none"


def test_moving_a_slider_while_idle_says_what_train_will_do():
    widget = TrainingWidget()
    widget.read_every.value = 1
    widget.batch.value = 256
    assert widget.status_text == (
        "Press Train to train on cpu, reading the loss every step, in batches of 256."
    )


def test_train_without_an_event_loop_trains_to_the_end_and_reports_measured_speed():
    widget = TrainingWidget(max_steps=200, read_every=20)
    widget.run.click()
    assert widget.status_text.startswith("done: step 200 of 200 on cpu · measured: ")
    assert "steps/s" in widget.status_text and "samples/s" in widget.status_text
    assert widget.status_text.endswith("the loss read 10 times so far")
    assert widget.curve.value.count("<polyline") == 1 and "10 reads" in widget.curve.value
    assert "<td>cpu</td><td>20</td><td>64</td><td>200</td>" in widget.speeds.value
    assert not widget.run.disabled and widget.stop.disabled


def test_train_runs_on_the_event_loop_stop_ends_it_and_sliders_start_new_rows():
    widget = TrainingWidget(max_steps=100_000, chunk_seconds=0.02)
    seen = []

    async def press_move_and_stop():
        widget.run.click()
        assert widget.playing and widget.run.disabled and not widget.stop.disabled
        await asyncio.sleep(0.15)
        seen.append((widget.run.disabled, widget.stop.disabled, widget.status_text))
        widget.read_every.value = 1
        widget.batch.value = 256
        await asyncio.sleep(0.15)
        widget.stop.click()
        await widget._task

    asyncio.run(press_move_and_stop())
    assert seen[0][:2] == (True, False) and seen[0][2].startswith("training: step ")
    assert widget.status_text.startswith("stopped: step ")
    steps = widget.trainer.step
    assert 0 < steps < 100_000
    rows = widget.speeds.value
    assert (
        "<td>cpu</td><td>10</td><td>64</td>" in rows
        and "<td>cpu</td><td>1</td><td>256</td>" in rows
    )
    assert not widget.playing and not widget.run.disabled and widget.stop.disabled


def test_the_kernel_stays_free_while_it_trains():
    """Other work on the same event loop goes on between chunks of steps."""
    widget = TrainingWidget(max_steps=100_000, chunk_seconds=0.02)
    ticks = []

    async def other_work():
        widget.run.click()
        for _ in range(10):
            ticks.append(widget.trainer.step if widget.trainer else 0)
            await asyncio.sleep(0.03)
        widget.stop.click()
        await widget._task

    asyncio.run(other_work())
    assert len(ticks) == 10 and ticks[-1] > ticks[1] > 0  # training advanced between our turns


def test_a_second_train_starts_a_fresh_network_and_keeps_the_earlier_rows():
    widget = TrainingWidget(max_steps=40, read_every=10)
    widget.run.click()
    first = widget.trainer
    widget.read_every.value = 20  # between runs: no training to change, only the next run's
    widget.run.click()
    assert widget.trainer is not first and widget.trainer.step == 40
    assert widget.trainer.readings[0].step == 20
    assert widget.speeds.value.count("<tr><td>cpu</td>") == 2


def test_a_second_click_while_training_does_not_start_a_second_run():
    widget = TrainingWidget(max_steps=100_000, chunk_seconds=0.01)

    async def double_click():
        widget.run.click()
        task = widget._task
        widget.run.click()
        assert widget._task is task
        widget.stop.click()  # before the task has run at all: it still counts
        await task

    asyncio.run(double_click())
    assert widget.status_text.startswith("stopped: ")


def test_refuses_a_batch_size_it_does_not_offer():
    with pytest.raises(ValueError, match="batch_size must be one of"):
        TrainingWidget(batch_size=100)


def test_widgets_carry_the_documented_css_classes():
    widget = TrainingWidget()
    parts = [
        widget.view,
        widget.read_every,
        widget.batch,
        widget.run,
        widget.stop,
        widget.status,
        widget.curve,
        widget.speeds,
    ]
    classes = {name for w in parts for name in w._dom_classes} - {SLIDER_CLASS}
    assert classes == {
        "training",
        "training-read-every",
        "training-batch",
        "training-train",
        "training-stop",
        "training-status",
        "training-curve",
        "training-speeds",
    }
    import gpucourse.training_widget as module

    assert all(f"``{name}``" in module.__doc__ for name in classes)


def test_both_sliders_are_named_for_screen_readers_by_a_script_inside_the_widget():
    widget = TrainingWidget()
    assert (
        SLIDER_CLASS in widget.read_every._dom_classes and SLIDER_CLASS in widget.batch._dom_classes
    )
    (namer,) = [w for w in widget.view.children if isinstance(w, ipywidgets.Output)]
    (output,) = namer.outputs
    assert output["data"]["application/javascript"] == NAME_SLIDERS_JS
    assert f".{SLIDER_CLASS}" in NAME_SLIDERS_JS and "aria-label" in NAME_SLIDERS_JS


def test_mime_bundle_has_the_live_view_and_a_fallback_without_measured_figures():
    widget = TrainingWidget(max_steps=30)
    widget.run.click()  # even after a run, the fallback shows none of its figures
    bundle = widget._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.view.model_id
    html = bundle["text/html"]
    question, folded = html.split("<details>", 1)
    assert "4,547 parameters" in question and "Predict before you train" in question
    assert "steps/s" not in html and "samples/s" not in html
    assert folded.startswith("<summary>What to look for</summary>") and "no queue" in folded
    assert "slower" not in bundle["text/plain"]


def test_the_curve_is_light_to_redraw_and_readable_without_colour():
    widget = TrainingWidget(max_steps=1200, read_every=1)
    widget.run.click()
    svg = widget.curve.value
    assert svg.count(",") <= 2 * 300 + 10  # at most 300 points drawn of 1,200 reads
    assert 'role="img"' in svg and "1200 reads" in svg and "training step" in svg
    assert "#E69F00" in svg  # the CPU's colour; the axis says the device in words
