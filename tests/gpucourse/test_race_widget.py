"""The race widget, driven from Python as a front end would drive it."""

import asyncio

import ipywidgets
import pytest

from gpucourse.race import Race
from gpucourse.race_widget import NAME_SLIDERS_JS, RaceWidget
from gpucourse.widget_access import SLIDER_CLASS


def test_starts_with_the_seeds_prompt_and_lanes_waiting():
    race = RaceWidget()
    assert race.status_text == "Press Run."
    assert race.steps.value == 1 and race.steps.description == "Steps"
    assert race.run.description == "Run" and not race.run.disabled
    assert ">CPU<" in race.cpu.value and "waiting" in race.cpu.value
    assert ">GPU<" in race.gpu.value and "waiting" in race.gpu.value


def test_moving_the_slider_before_a_run_asks_for_a_prediction():
    race = RaceWidget()
    race.steps.value = 3
    assert race.status_text == "3 steps: predict the winner, then press Run."


def test_run_plays_to_the_end_and_states_both_totals_and_the_winner():
    race = RaceWidget()
    race.run.click()  # no event loop here: every frame is drawn at once
    assert race.status_text == "1 step: CPU 32 ticks, GPU 81 ticks — the CPU wins."
    assert "done · 32 ticks" in race.cpu.value
    assert "done · 81 ticks" in race.gpu.value
    assert race.status.value.count("CPU 32 ticks, GPU 81 ticks") == 1
    assert not race.run.disabled


@pytest.mark.parametrize(
    "steps, line",
    [
        (2, "2 steps: CPU 64 ticks, GPU 82 ticks — the CPU wins."),
        (3, "3 steps: CPU 96 ticks, GPU 83 ticks — the GPU wins."),
    ],
)
def test_after_a_run_the_slider_updates_the_result_line(steps, line):
    race = RaceWidget()
    race.run.click()
    race.steps.value = steps
    assert race.status_text == line
    assert "done" in race.cpu.value and "done" in race.gpu.value


def test_run_animates_on_the_event_loop_with_the_button_disabled_until_the_end():
    race = RaceWidget(seconds_per_frame=0)
    race.steps.value = 3
    seen = []

    async def press_and_watch():
        race.run.click()
        assert race.playing and race.run.disabled
        while race.playing:
            seen.append((race.run.disabled, race.gpu.value))
            await asyncio.sleep(0)
        await race._task

    asyncio.run(press_and_watch())
    assert all(disabled for disabled, _ in seen)
    states = [html for _, html in seen]
    assert any("copying to GPU" in s for s in states)
    assert any("step 2 of 3 on the GPU" in s for s in states)
    assert any("copying back to CPU" in s for s in states)
    assert race.status_text == "3 steps: CPU 96 ticks, GPU 83 ticks — the GPU wins."
    assert not race.run.disabled


def test_a_second_click_while_playing_does_not_start_a_second_race():
    race = RaceWidget(seconds_per_frame=0)

    async def double_click():
        race.run.click()
        first = race._task
        race.run.click()
        assert race._task is first
        await first

    asyncio.run(double_click())
    assert not race.run.disabled


def test_moving_the_slider_mid_race_stops_it_and_gives_the_button_back():
    race = RaceWidget(seconds_per_frame=0)

    async def move_mid_race():
        race.run.click()
        task = race._task
        await asyncio.sleep(0)
        race.steps.value = 5
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(move_mid_race())
    assert not race.run.disabled and not race.playing
    assert race.status_text == "5 steps: predict the winner, then press Run."


def test_measured_mode_races_on_given_speeds_and_states_the_crossover():
    measured = Race.measured(1.2, 0.016, 0.5, 0.5, note="CPU measured here")
    race = RaceWidget(measured=measured)
    assert race.mode.value == "ticks"
    race.run.click()
    race.mode.value = "measured"
    assert race.status_text == "1 step: CPU 1.2 ms, GPU 1.02 ms — the GPU wins."
    assert "The GPU wins from 1 step on." in race.rule.value
    race.mode.value = "ticks"
    assert race.status_text == "1 step: CPU 32 ticks, GPU 81 ticks — the CPU wins."
    assert "wins from" not in race.rule.value  # the tick race's crossover is the exercise


def test_mode_toggle_only_when_measured_speeds_are_given():
    assert RaceWidget().mode not in RaceWidget().view.children
    race = RaceWidget(measured=Race.measured(1.0, 0.1, 1.0, 1.0))
    assert race.mode in race.view.children


def test_widgets_carry_the_documented_css_classes():
    race = RaceWidget()
    classes = {
        name
        for w in [
            race.view,
            race.steps,
            race.run,
            race.cpu,
            race.gpu,
            race.status,
            race.rule,
            race.mode,
        ]
        for name in w._dom_classes
    } - {SLIDER_CLASS}
    assert classes == {
        "race",
        "race-steps",
        "race-run",
        "race-lane-cpu",
        "race-lane-gpu",
        "race-result",
        "race-rule",
        "race-mode",
    }
    import gpucourse.race_widget as module

    assert all(f"``{name}``" in module.__doc__ for name in classes)


def test_lanes_use_okabe_ito_colours_and_words():
    race = RaceWidget()
    race.run.click()
    assert "#E69F00" in race.cpu.value and "#0072B2" in race.gpu.value


def test_the_slider_naming_script_travels_inside_the_widget():
    race = RaceWidget()
    (output,) = race._name_sliders.outputs
    assert output["data"]["application/javascript"] == NAME_SLIDERS_JS
    assert race._name_sliders in race.view.children
    assert "aria-label" in NAME_SLIDERS_JS and f".{SLIDER_CLASS}" in NAME_SLIDERS_JS
    assert SLIDER_CLASS in race.steps._dom_classes  # the script names this slider "Steps"


def test_mime_bundle_has_the_live_view_and_a_static_fallback_that_folds_the_answer():
    race = RaceWidget(measured=Race.measured(1.2, 0.016, 0.5, 0.5))
    bundle = race._repr_mimebundle_()
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == race.view.model_id and view["version_major"] == 2
    html = bundle["text/html"]
    rules, answer = html.split("<details>", 1)
    assert "Total ticks: CPU = 32 × steps, GPU = 40 + steps + 40" in rules
    assert "ticks</td>" not in rules and "wins" not in rules and "<svg" not in rules
    assert answer.startswith("<summary>Answer")
    assert "<table" in answer and "<svg" in answer
    assert "<td>3</td><td>96 ticks</td><td>83 ticks</td><td>GPU ← the GPU starts winning" in answer
    assert "The GPU wins from 3 steps on." in answer
    # Only the tick race: a saved notebook would show one machine's speeds as everyone's.
    assert html.count('class="race-fallback"') == 1 and " ms" not in html
    # The plain-text form does not answer the prediction either.
    assert "wins" not in bundle["text/plain"] and "ticks" not in bundle["text/plain"]


def test_without_a_gpu_the_measured_race_says_its_gpu_is_assumed():
    measured = Race.measured(1.2, 0.016, 0.48, 0.48, note="CPU measured here", gpu_assumed=True)
    race = RaceWidget(measured=measured)
    race.run.click()
    race.mode.value = "measured"
    assert race.status_text == (
        "1 step: CPU 1.2 ms, GPU 0.976 ms — the GPU wins (the GPU's times assumed, not measured)."
    )
    assert "With the assumed GPU, the GPU would win from 1 step on." in race.rule.value
    assert "The GPU wins from" not in race.rule.value


def test_view_is_an_ipywidgets_box():
    assert isinstance(RaceWidget().view, ipywidgets.VBox)


def test_static_chart_marks_the_crossover_or_says_there_is_none():
    from gpucourse.figures import race_chart_svg, race_fallback_html

    assert "GPU wins from 3 steps" in race_chart_svg(Race.ticks())
    never = Race.ticks(cpu_per_tick=256)
    assert "wins from" not in race_chart_svg(never)
    assert "the GPU never wins" in race_chart_svg(never)
    assert "With these speeds the GPU never wins." in race_fallback_html(never)
