"""The race's arithmetic: the seed's totals, its crossover, and the measured mode."""

import math

import pytest

from gpucourse.race import CPU, GPU, TIE, Race


@pytest.mark.parametrize("steps", range(1, 65))
def test_seed_totals(steps):
    race = Race.ticks()
    assert race.cpu_total(steps) == 32 * steps
    assert race.gpu_total(steps) == 40 + steps + 40
    assert race.winner(steps) == (GPU if 32 * steps > 80 + steps else CPU)


def test_seed_result_lines():
    race = Race.ticks()
    assert race.result_line(1) == "1 step: CPU 32 ticks, GPU 81 ticks — the CPU wins."
    assert race.result_line(2) == "2 steps: CPU 64 ticks, GPU 82 ticks — the CPU wins."
    assert race.result_line(3) == "3 steps: CPU 96 ticks, GPU 83 ticks — the GPU wins."


def test_seed_crossover_is_three_steps():
    race = Race.ticks()
    assert race.crossover() == 3
    assert race.winner(2) == CPU and race.winner(3) == GPU


def test_other_tick_rules_move_the_crossover():
    # Copies of 10 ticks: 32s > 20 + s from s = 1.
    assert Race.ticks(copy_ticks=10).crossover() == 1
    # A CPU that does all 256 per tick never loses to a GPU that must copy.
    assert Race.ticks(cpu_per_tick=256).crossover() is None


@pytest.mark.parametrize(
    "cpu, gpu, copy_in, copy_out",
    [
        (1.2, 0.016, 0.5, 0.5),  # the seed's worked example on a slow-core machine
        (0.4, 0.016, 0.48, 0.48),  # the seed's own figures
        (0.4, 0.016, 2.0, 2.0),  # pageable copies, several times slower
        (3.0, 1.0, 4.0, 4.0),  # copies / saving is a whole number: a tie at 4 steps
    ],
)
def test_measured_crossover_agrees_with_the_speeds(cpu, gpu, copy_in, copy_out):
    race = Race.measured(cpu, gpu, copy_in, copy_out)
    n = race.crossover()
    # Independent check: the first number of steps where the GPU's total is lower.
    expected = next(s for s in range(1, 10_000) if copy_in + s * gpu + copy_out < s * cpu)
    assert n == expected
    assert race.winner(n) == GPU
    assert n == 1 or race.winner(n - 1) in (CPU, TIE)
    assert race.unit == "ms"


def test_measured_tie_is_reported_as_a_tie():
    race = Race.measured(3.0, 1.0, 4.0, 4.0)
    assert race.winner(4) == TIE
    assert race.result_line(4).endswith("a tie.")
    assert race.crossover() == 5


def test_measured_gpu_slower_than_cpu_never_crosses():
    assert Race.measured(0.1, 0.2, 0.5, 0.5).crossover() is None


def test_measured_result_line_has_units():
    line = Race.measured(1.2, 0.016, 0.5, 0.5).result_line(1)
    assert line == "1 step: CPU 1.2 ms, GPU 1.02 ms — the GPU wins."


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_bad_steps_get_a_clear_error(bad):
    with pytest.raises(ValueError, match="steps must be a whole number"):
        Race.ticks().cpu_total(bad)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_bad_speeds_get_a_clear_error(bad):
    with pytest.raises(ValueError, match="copy_in must be a finite number"):
        Race.measured(1.0, 0.1, bad, 0.5)


def test_lanes_walk_through_their_states_and_end_done():
    race = Race.ticks()
    assert race.gpu_lane(3, 0).state == "copying to GPU"
    assert race.gpu_lane(3, 40).state == "step 1 of 3 on the GPU"
    assert race.gpu_lane(3, 42).state == "step 3 of 3 on the GPU"
    assert race.gpu_lane(3, 43).state == "copying back to CPU"
    assert race.gpu_lane(3, 83).state == "done"
    assert race.cpu_lane(3, 0).state == "step 1 of 3"
    assert race.cpu_lane(3, 64).state == "step 3 of 3"
    assert race.cpu_lane(3, 96).state == "done"
    assert race.cpu_lane(3, 50).fraction == pytest.approx(50 / 96)
    assert race.gpu_lane(3, 90).fraction == 1.0


def test_frames_go_tick_by_tick_when_short_and_end_at_the_finish():
    race = Race.ticks()
    times = race.frame_times(3)
    assert times == list(range(97))
    long = race.frame_times(64, max_frames=120)
    assert len(long) == 121 and long[-1] == 32 * 64
    last = long[-1]
    assert race.cpu_lane(64, last).done and race.gpu_lane(64, last).done


def test_table_lists_totals_and_winners():
    assert Race.ticks().table([1, 2, 3]) == [(1, 32, 81, CPU), (2, 64, 82, CPU), (3, 96, 83, GPU)]
