"""The pipeline timeline widget, driven from Python as a front end would drive it."""

import asyncio

from gpucourse.image_batches import measure_speeds
from gpucourse.pipeline_widget import BATCHES, PipelineWidget
from gpucourse.widget_access import SLIDER_CLASS


def test_starts_unrevealed_with_every_control_named_in_words():
    widget = PipelineWidget()
    assert widget.status_text == (
        "no workers (the main process loads), pageable memory, one stream, "
        "copied as float32: predict the time per batch and the bottleneck, "
        "then press Run."
    )
    assert widget.workers.description == "Loader workers" and (
        widget.workers.min,
        widget.workers.max,
    ) == (0, 4)
    assert SLIDER_CLASS in widget.workers._dom_classes
    assert (
        widget.pinned.description == "Pinned memory"
        and widget.side_stream.description == "Copy on a side stream"
    )
    assert list(widget.dtype.options) == ["uint8", "float32"] and widget.run.description == "Run"
    assert widget.mode not in widget.view.children  # no measured speeds given: no toggle
    # Lanes named in words, empty before Run; the rule says where each figure came from.
    assert (
        "load, main process" in widget.timeline.value and "compute on GPU" in widget.timeline.value
    )
    assert "0 of 8 computed" in widget.timeline.value
    assert "made up: an 8 ms step on the GPU" in widget.rule.value
    # "One after another" means what the model computes: no workers, the main process loading.
    assert (
        "No workers means the main process loads each batch and every stage waits for the one "
        "before: one after another, as in a loop that waits for the GPU at every step (it reads "
        "the loss, say)."
    ) in widget.rule.value
    assert "load: 26 ms a batch of 256 for one worker" in widget.rule.value
    assert "38.5 MB, a batch of 256 as uint8" not in widget.rule.value  # float32 by default
    assert "154 MB, a batch of 256 as float32" in widget.rule.value


def test_run_without_an_event_loop_shows_the_steady_state_and_settings_update_it():
    widget = PipelineWidget()
    widget.run.click()
    assert widget.status_text == (
        "8 batches in 371 ms · 46.3 ms a batch in steady state · bottleneck: "
        "load · GPU busy 17% of the time (assumed: made-up stage times, the "
        "first unit's link speed)."
    )
    assert f"{BATCHES} of {BATCHES} computed" in widget.timeline.value
    widget.workers.value = 2
    assert (
        "20.3 ms a batch" in widget.status_text
        and "bottleneck: copy + compute" in widget.status_text
    )
    assert "load, worker 2" in widget.timeline.value
    widget.pinned.value = widget.side_stream.value = True
    widget.dtype.value = "uint8"
    assert "10 ms a batch" in widget.status_text and "bottleneck: load" in widget.status_text
    widget.workers.value = 3
    assert "8 ms a batch" in widget.status_text and "GPU busy 100%" in widget.status_text


def test_run_plays_on_the_event_loop_and_a_change_stops_it():
    widget = PipelineWidget(seconds_per_frame=0.01)
    seen = []

    async def press_and_watch():
        widget.run.click()
        seen.append((widget.playing, widget.run.disabled))
        await asyncio.sleep(0.1)
        seen.append(widget.status_text)
        await widget._task
        seen.append(widget.status_text)
        widget.run.click()
        await asyncio.sleep(0.05)
        widget.workers.value = 1  # mid-play: stops, and shows the new settings at once
        await asyncio.sleep(0.05)

    asyncio.run(press_and_watch())
    assert seen[0] == (True, True) and seen[1] == "running…"
    assert seen[2].startswith("8 batches in 371 ms")
    assert not widget.playing and not widget.run.disabled and "1 worker" not in widget.status_text
    assert widget.status_text.startswith("8 batches in ") and "(assumed" in widget.status_text


def test_measured_mode_says_which_stages_were_measured_here():
    widget = PipelineWidget(measured=measure_speeds("cpu", batch=4, min_run_time=0.01))
    assert widget.mode in widget.view.children
    widget.mode.value = "measured"
    widget.run.click()
    assert widget.status_text.endswith("(CPU stages measured here; copy and GPU step assumed).")
    assert "measured here: one worker (one CPU thread) loads a batch of 4" in widget.rule.value
    assert "assumed (no GPU here)" in widget.rule.value and "CPU core" in widget.rule.value


def test_the_static_fallback_asks_first_and_folds_the_answers():
    html = PipelineWidget()._repr_mimebundle_()["text/html"]
    shown, folded = html.split("<details>", 1)
    assert "Predict before you run it" in shown and "ms" not in shown.replace("Colab", "")
    assert "46.3 ms" in folded and "100%" in folded and "<svg" in folded
