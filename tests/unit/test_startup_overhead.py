"""`startup_seconds`: time to the first training step plus the first call's excess over its steps."""

import pytest

from hpo.training.epoch_loop import startup_overhead


def test_the_first_calls_own_steps_come_off_at_the_later_calls_rate():
    # First call: 8 steps in 1.0 s; later calls 8 steps in 0.08 s and a last call of 4 in 0.04 s.
    calls = [(1.0, 8), (0.08, 8), (0.08, 8), (0.04, 4)]
    assert startup_overhead(1.5, calls) == pytest.approx(1.5 - 8 * 0.01)


def test_a_first_call_faster_than_the_rest_never_goes_below_the_wait_before_it():
    assert startup_overhead(0.5, [(0.05, 8), (0.2, 8)]) == pytest.approx(0.45)


def test_an_epoch_of_one_call_counts_it_all():
    assert startup_overhead(2.0, [(1.5, 8)]) == 2.0
