"""A small fused group may run in a bigger cached program, its spare slots idle, when what
that program measured of itself says this is cheaper than compiling one of the group's size."""

import pytest

from hpo.fusion.spare_slots import RECENT_CALLS, CallTimes, best_spare_program, cheaper_with_spare_slots


def measured(first_call: float, first_steps: int, step: float) -> CallTimes:
    times = CallTimes()
    times.record(first_steps, first_call)
    for _ in range(3):
        times.record(10, 10 * step)
    return times


def test_a_programs_compile_cost_is_its_first_call_beyond_its_steps():
    times = CallTimes()
    assert times.step is None and times.compile_seconds is None
    times.record(32, 2.0 + 32 * 0.01)           # the first call traces and compiles
    assert times.compile_seconds is None         # no steady call yet to tell the two apart
    times.record(32, 0.32)
    times.record(31, 0.31)
    assert times.step == pytest.approx(0.01)
    assert times.compile_seconds == pytest.approx(2.0)
    for _ in range(2 * RECENT_CALLS):
        times.record(10, 0.2)                    # the machine got slower: recent calls count
    assert times.step == pytest.approx(0.02)


def test_spare_slots_win_when_their_idle_work_costs_less_than_a_compile():
    times = measured(first_call=1.0 + 32 * 0.008, first_steps=32, step=0.008)   # compile 1 s
    # 8-slot program, 6 trials of 100 steps: 2/8 of 100 steps wasted = 0.2 s < 1 s.
    assert cheaper_with_spare_slots(6, 100, 8, times) == pytest.approx(0.8)
    # 6 trials of 1,000 steps: 2 s of spare work, more than a compile.
    assert cheaper_with_spare_slots(6, 1000, 8, times) is None
    # Never a program with no spare slots to give, nor one not yet measured.
    assert cheaper_with_spare_slots(8, 100, 8, times) is None
    assert cheaper_with_spare_slots(4, 100, 8, CallTimes()) is None


def test_the_program_that_saves_most_is_taken():
    slow_compile = measured(3.0, 1, 0.001)
    quick_compile = measured(0.01, 1, 0.001)      # compiles in 9 ms: less than 2/8 of 100 steps
    candidates = [(8, quick_compile, "k8"), (16, slow_compile, "k16"), (4, slow_compile, "k4 (too small)")]
    assert best_spare_program(6, 100, candidates) == "k16"
    assert best_spare_program(6, 100, candidates[:1]) is None      # compiling would be cheaper
    assert best_spare_program(6, 100, []) is None
