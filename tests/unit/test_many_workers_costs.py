"""The simulated cost of an LCBench epoch in benchmarks/many_workers.py: the surrogate's
cumulative `time`, made to rise where the regression falls. The surrogate lives in the
benchmark venv; a stand-in replays one config's curve as the surrogate gave it."""

import numpy as np
import pytest

import benchmarks.many_workers as mw

# One config's `time` on LCBench 126025, epochs 1-52, as the surrogate reads it: it peaks at
# epoch 20 and falls to a quarter of that by epoch 52.
FALLING = [14.5, 17.9, 22.6, 26.3, 31.1, 36.3, 41.2, 47.3, 53.6, 60.6, 67.8, 74.2, 77.4, 80.6, 84.3, 88.3, 91.9,
           94.4, 95.5, 95.9, 95.9, 95.8, 95.8, 95.4, 94.1, 91.8, 89.9, 88.2, 86.0, 82.8, 79.8, 76.8, 73.7, 70.0,
           66.1, 63.4, 60.7, 57.8, 54.9, 51.6, 48.5, 45.5, 42.7, 40.1, 37.8, 35.5, 33.5, 31.4, 29.4, 27.4, 25.6,
           23.9]


def test_a_rising_curve_is_kept_as_it_is():
    rising = np.cumsum(np.linspace(3.0, 5.0, 52))
    assert mw.rising_time(rising) == pytest.approx(rising)


def test_where_the_surrogate_falls_an_epoch_costs_the_median_rising_epoch():
    seconds = mw.rising_time(np.array(FALLING))
    steps = np.diff(seconds, prepend=0.0)
    rising = np.diff(FALLING, prepend=0.0)
    typical = np.median(rising[rising > 0])
    assert np.all(steps > 0)
    assert seconds[:20] == pytest.approx(FALLING[:20])           # up to the peak, as the surrogate says
    assert steps[20:] == pytest.approx([typical] * 32)            # the plateau and the fall: typical epochs
    assert seconds[51] - seconds[16] > 100                        # a promotion from 17 to 52 epochs is not free


class StandIn:
    """The YAHPO surrogate's interface: set_instance, objective_function over a batch."""

    def __init__(self):
        self.batches = []

    def set_instance(self, task):
        self.task = task

    def objective_function(self, configs):
        self.batches.append(len(configs))
        return [{"val_balanced_accuracy": 0.5 + c["epoch"] / 200, "time": FALLING[c["epoch"] - 1]} for c in configs]


def test_an_lcbench_problem_charges_the_rising_seconds_and_keys_its_runs_apart(monkeypatch):
    surrogate = StandIn()
    monkeypatch.setattr(mw, "_yahpo", lambda path: surrogate)
    problem = mw.lcbench_problem("126025")
    config = {"batch_size": 27, "learning_rate": 0.07}
    expected = mw.rising_time(np.array(FALLING))
    value, seconds = problem.evaluate(config, 52.0, 0)
    assert seconds == pytest.approx(expected[51]) and value == pytest.approx(1.0 - (0.5 + 52 / 200))
    assert problem.evaluate(config, 52 / 27, 0)[1] == pytest.approx(expected[1])       # the lowest rung: 2 epochs
    assert [s for _, s in problem.curve(config)] == pytest.approx(list(expected))
    assert surrogate.batches == [52]                             # one batch per config, then memoised
    assert problem.costs and not mw.mfh_problem("mfh3_moderate").costs


def test_the_seed_interval_resamples_whole_seeds_around_the_geometric_mean():
    same = {seed: [2.0, 8.0] for seed in range(6)}
    assert mw.seed_interval(same) == pytest.approx((4.0, 4.0))         # no spread between seeds: none
    spread = {0: [1.0, 4.0], 1: [4.0, 16.0], 2: [16.0, 64.0]}           # per-seed geomeans 2, 8 and 32
    low, high = mw.seed_interval(spread)
    assert 2.0 <= low < mw.geomean(sum(spread.values(), [])) < high <= 32.0
    assert mw.seed_interval(spread) == (low, high)                      # seeded: the same every time
    assert all(np.isnan(mw.seed_interval({0: [float("nan")], 1: [0.0]})))  # no usable run: no interval


def test_missed_runs_name_each_run_that_never_reached_its_one_worker_final():
    problem = mw.SimProblem("p", {}, 1.0, 9.0, None, None, None)

    def run(*points):
        return mw.Run(trace=list(points), end=10.0, window=10.0, utilisation=1.0, decisions=[], trials=1)
    runs = {("p", "s", 1, 0): run((1.0, 0.5), (8.0, 0.20)), ("p", "s", 64, 0): run((0.5, 0.3), (2.0, 0.21)),
            ("p", "s", 1, 1): run((1.0, 0.4)), ("p", "s", 64, 1): run((0.2, 0.4))}
    assert mw.missed_runs([problem], "s", 64, [0, 1], runs) == ["p seed 0: ended at 0.2100 against 0.2000 (+5.0%)"]
