"""benchmarks/many_workers_diagnosis.py's arithmetic: when the first good config started, what
a perfect promoter would have reached, and the speedup of mean curves. Constructed inputs;
the simulations themselves are tests/unit/test_simulated_executor.py's."""

import math
from types import SimpleNamespace

import pytest

import benchmarks.many_workers_diagnosis as diagnosis


def trial(started, **config):
    return SimpleNamespace(started_at=started, config=config)


def test_a_config_counts_from_its_first_start_not_from_its_promotions():
    starts = diagnosis.first_starts([trial(5.0, x=0.5), trial(1.0, x=0.5), trial(2.0, x=0.1), trial(None, x=0.9)])
    assert sorted((start, config["x"]) for start, config in starts.values()) == [(1.0, 0.5), (2.0, 0.1)]


def test_the_perfect_promoter_takes_the_good_config_that_finishes_first():
    starts = {"a": (0.2, {"x": 0.1}), "b": (0.5, {"x": 0.2}), "c": (0.1, {"x": 0.9})}
    cost = {0.1: 2.0, 0.2: 0.5, 0.9: 0.1}
    good, first, done = diagnosis.earliest_good(starts, lambda c: c["x"] < 0.5, lambda c: cost[c["x"]])
    # a started first (0.2) but costs 2.0; b, started at 0.5, is at the top budget by 1.0.
    assert (good, first, done) == (2, 0.2, 1.0)
    assert diagnosis.earliest_good(starts, lambda c: False, lambda c: 1.0) == (0, math.inf, math.inf)


def test_the_first_top_budget_result_is_the_earliest_finished_with_a_value_there():
    def done(budget, finished, value=1.0):
        return SimpleNamespace(budget=budget, finished_at=finished, value=value)
    trials = [done(27.0, 3.0), done(9.0, 0.5), done(27.0, 2.0, value=None), done(27.0, None), done(27.0, 2.5)]
    assert diagnosis.first_top_result(trials, 27.0) == 2.5
    assert diagnosis.first_top_result(trials[1:2], 27.0) == math.inf


def row(one_worker, reached, perfect, end=5.0):
    return diagnosis.TimeToTarget("p", 0, 0.0, one_worker, reached, 5.0, end, 10, 1, 0.0, perfect)


def test_speedups_count_a_missed_run_at_its_end_and_the_promoter_never_later_than_the_run():
    rows = [row(40.0, 2.0, 1.0), row(40.0, math.inf, 4.0, end=5.2), row(40.0, 1.0, 3.0)]
    own, perfect = diagnosis.speedups(rows)
    assert own == pytest.approx((20.0 * (40.0 / 5.2) * 40.0) ** (1 / 3))
    assert perfect == pytest.approx((40.0 * 10.0 * 40.0) ** (1 / 3))


def test_the_report_gives_every_row_as_many_cells_as_its_header(capsys):
    rows = [row(40.0, 2.0, 1.0), row(40.0, math.inf, 4.0, end=5.2)]
    rows[1].problem, rows[1].good = "q", 0
    diagnosis.report(rows)
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| p", "| q", "| all"]
    assert len({line.count("|") for line in lines}) == 1


def test_mean_curves_are_averaged_over_seeds_before_the_target_is_read():
    # Two 1-worker runs: one lucky (0.0 at t=8), one not (2.0 from t=9); their mean ends at 1.0,
    # first reached at t=9. The W-worker runs' mean reaches 1.0 at t=0.5.
    ones = [[(1.0, 3.0), (8.0, 0.0)], [(1.0, 3.0), (9.0, 2.0)]]
    manys = [[(0.1, 2.0), (0.5, 1.0)], [(0.1, 1.5), (0.5, 1.0)]]
    speedup, reached = diagnosis.mean_curve_speedup(ones, manys, t1=10.0, window=1.0, points=1001)
    assert reached and speedup == pytest.approx(9.0 / 0.5)
    # A W-worker mean that never gets there counts at the window's end.
    speedup, reached = diagnosis.mean_curve_speedup(ones, [[(0.1, 2.0)], [(0.1, 2.0)]], t1=10.0, window=1.0)
    assert not reached and speedup == pytest.approx(9.0)
