"""What keeps a searcher's decision cheap over long searches: density models on a bounded
number of rows spread over the ranking, per-budget results kept as arrays in step with the
dicts they mirror, and one BLAS thread while a searcher decides. (How fast is measured by
benchmarks/decision_time.py, never asserted here.)"""

import math

import numpy as np
import pytest

from hpo.search import BOHB
from hpo.search.base import MAX_DENSITY_ROWS, config_key, spread_over_ranking, win_rate
from hpo.search.surrogates.blas import one_blas_thread
from hpo.search.surrogates.kde import Dimension
from hpo.search.surrogates.rung_agreement import MAX_LOWER, features
from hpo.search.surrogates.tpe import MultiFidelityTPESampler, _SplitModel
from hpo.space import SearchSpace


def test_a_ranking_that_fits_is_kept_whole():
    assert spread_over_ranking(5, limit=10).tolist() == [0, 1, 2, 3, 4]
    assert spread_over_ranking(MAX_DENSITY_ROWS).tolist() == list(range(MAX_DENSITY_ROWS))


def test_a_long_ranking_keeps_its_best_and_worst_and_evenly_spaced_entries_between():
    kept = spread_over_ranking(10_000, limit=1000)
    assert len(kept) == 1000 and len(set(kept.tolist())) == 1000
    assert kept[0] == 0 and kept[-1] == 9999
    assert np.all(np.diff(kept) >= 9) and np.all(np.diff(kept) <= 11)
    # The share gamma of the kept entries is the share gamma of the ranking.
    assert kept[149] == pytest.approx(0.15 * 9999, abs=10)


def test_the_split_model_fits_at_most_the_bounded_rows_and_keeps_the_split_quantile():
    rng = np.random.default_rng(0)
    points = rng.random((5000, 2))
    losses = points[:, 0]                     # the good side sits at low x0
    model = _SplitModel(points, losses, 0.15, [Dimension("c"), Dimension("c")], 0.01)
    good = model.good[0].mus[:-1]             # without the prior component
    bad = model.bad[0].mus[:-1]
    assert len(good) + len(bad) == MAX_DENSITY_ROWS
    assert len(good) == math.ceil(0.15 * MAX_DENSITY_ROWS)
    assert good.max() < bad.min()
    assert good.max() == pytest.approx(np.quantile(losses, 0.15), abs=0.005)


def test_per_budget_results_stay_in_step_with_the_dicts_when_a_config_is_told_again():
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "opt": {"type": "choice", "values": ["a", "b"]},
                                   "m": {"type": "float", "low": 0, "high": 1, "when": {"opt": "b"}}})
    sampler = MultiFidelityTPESampler(space)

    def config(i):
        return {"x": i / 300, "opt": "a"} if i % 2 else {"x": i / 300, "opt": "b", "m": (i % 7) / 7}

    for i in range(300):                             # more than the rung agreement's MAX_LOWER
        if i % 3 == 0:                               # as if the model had drawn it at budget 1
            sampler._modelled[config_key(config(i))] = 1.0
        sampler.observe(config(i), 1.0, float(i))
    sampler.observe(config(150), 3.0, 7.0)           # promoted: its deepest budget moves up
    sampler.observe(config(150), 1.0, 2.0)           # then told below its deepest
    sampler.observe(config(75), 1.0, -1.0)           # told again at the same budget: keeps its place
    for budget, results in sampler.by_budget.items():
        expected = np.array(list(results.values()), dtype=float).reshape(-1, 2)
        np.testing.assert_array_equal(sampler._results(budget), expected)
        # Each result's config row and its "not drawn here" mask, which the Gaussian process's
        # rows and the rung agreement's features read as slices.
        np.testing.assert_array_equal(sampler._result_table_rows(budget), [sampler._rows[k] for k in results])
        tail = list(results)[-MAX_LOWER:]
        np.testing.assert_array_equal(sampler._unmodelled(budget),
                                      [sampler._modelled.get(k) != budget for k in tail])
        vectors = np.array([sampler.deepest[k][2] for k in tail])
        np.testing.assert_array_equal(sampler._features_at(budget),
                                      features(vectors, sampler.dims, sampler._conditional_dims))
    assert len(sampler._unmodelled(1.0)) == MAX_LOWER < 300
    assert sampler._unmodelled(3.0).tolist() == [True]


def test_a_searcher_decides_on_one_blas_thread_and_gives_the_pool_back():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    controller = threadpoolctl.ThreadpoolController()
    blas = controller.select(user_api="blas")
    if not blas.lib_controllers:
        pytest.skip("no BLAS library loaded that threadpoolctl can size")
    with blas.limit(limits=2):
        before = [lib.num_threads for lib in blas.lib_controllers]
        with one_blas_thread():
            inside = [lib.num_threads for lib in threadpoolctl.ThreadpoolController().select(
                user_api="blas").lib_controllers]
        after = [lib.num_threads for lib in threadpoolctl.ThreadpoolController().select(
            user_api="blas").lib_controllers]
    assert set(inside) == {1}
    assert after == before


def test_a_capped_model_still_proposes_near_the_optimum_of_a_long_search():
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "y": {"type": "float", "low": 0, "high": 1}})
    searcher = BOHB(space, min_budget=1, max_budget=1, seed=0, model="tpe")
    for _ in range(MAX_DENSITY_ROWS + 300):       # past the cap
        job = searcher.ask()
        searcher.tell(job, (job.config["x"] - 0.3) ** 2 + (job.config["y"] - 0.7) ** 2)
    late = [job.config for job, _ in searcher.history[-100:]]
    distance = np.median([math.hypot(c["x"] - 0.3, c["y"] - 0.7) for c in late])
    assert distance < 0.1


def test_the_win_rate_is_exactly_the_mean_over_the_table_of_pairs():
    rng = np.random.default_rng(1)
    for n, m in ((1, 1), (7, 5), (300, 40)):
        for a, b in ((rng.integers(0, 9, n).astype(float), rng.integers(0, 9, m).astype(float)),
                     (rng.random(n), rng.random(m))):
            table = (a[:, None] < b[None, :]) + 0.5 * (a[:, None] == b[None, :])
            assert win_rate(a, b) == float(table.mean())
