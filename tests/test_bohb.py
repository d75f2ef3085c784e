import numpy as np
import pytest

from hpo.search import BOHB, AsyncBOHB, RandomSearch
from hpo.search.kde import KDE, Dimension, dimensions_of, impute
from hpo.space import SearchSpace
from tests.searcher_harness import SPACE, drive


def test_continuous_density_integrates_to_one_inside_the_bounds():
    kde = KDE(np.array([[0.02], [0.5], [0.97]]), [Dimension("c")], min_bandwidth=1e-3)
    grid = np.linspace(0, 1, 20001)[:, None]
    density = np.exp(kde.log_pdf(grid))
    integral = ((density[1:] + density[:-1]) / 2 * np.diff(grid[:, 0])).sum()   # trapezoid rule
    assert integral == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("kind", ["o", "u"])
def test_discrete_kernels_sum_to_one_over_levels(kind):
    levels = (np.arange(5) + 0.5) / 5
    kde = KDE(levels[[0, 0, 3]][:, None], [Dimension(kind, levels)])
    assert np.exp(kde.log_pdf(levels[:, None])).sum() == pytest.approx(1.0)


def test_samples_concentrate_around_the_data():
    rng = np.random.default_rng(0)
    kde = KDE(np.full((10, 2), 0.2) + rng.normal(0, 0.01, (10, 2)), [Dimension("c"), Dimension("c")])
    samples = kde.sample(rng, 2000)
    assert np.all((samples >= 0) & (samples <= 1))
    assert np.abs(samples.mean(axis=0) - 0.2).max() < 0.02


def test_dimension_kinds_follow_the_space():
    space = SearchSpace.from_dict({"f": {"type": "float", "low": 0, "high": 1},
                                   "few": {"type": "int", "low": 1, "high": 8},
                                   "many": {"type": "int", "low": 1, "high": 1000},
                                   "c": {"type": "choice", "values": ["a", "b"]}})
    assert [d.kind for d in dimensions_of(space)] == ["c", "o", "c", "u"]


def test_imputation_fills_inactive_entries_from_the_same_set():
    rng = np.random.default_rng(0)
    data = np.array([[0.1, np.nan], [0.2, 0.7], [0.3, np.nan], [0.4, np.nan]])
    filled = impute(data, [Dimension("c"), Dimension("c")], rng)
    assert not np.isnan(filled).any() and set(filled[:, 1]) == {0.7}


def test_model_is_fitted_on_the_largest_budget_with_enough_points():
    searcher = BOHB(SPACE, min_budget=1, max_budget=27, eta=3, seed=0)
    drive(searcher, 80)
    counts = {b: len(v) for b, v in searcher.sampler.observations.items()}
    enough = [b for b, n in counts.items() if n >= searcher.sampler.min_points_in_model + 2]
    assert searcher.sampler.model_budget == max(enough)


@pytest.mark.parametrize("levels", [4, 10])   # 12 configs (exhausted by the warm-up) and 100
def test_no_duplicate_proposals_while_jobs_are_pending(levels):
    space = {"a": {"type": "choice", "values": list(range(levels))}, "b": {"type": "choice", "values": [0, 1, 2]}}
    searcher = AsyncBOHB(space, min_budget=1, max_budget=9, eta=3, seed=0, min_points_in_model=2)
    for _ in range(30):  # warm the model at budget 1
        job = searcher.ask()
        searcher.tell(job, job.config["a"] + job.config["b"])
    pending = []
    for _ in range(6):
        job = searcher.ask()
        if job.continues is None:
            pending.append(tuple(sorted(job.config.items())))
    assert len(pending) == len(set(pending))


def test_bohb_beats_random_search_on_a_smooth_problem():
    """Mean best value over 8 seeds after 150 jobs at matched budgets (deterministic seeds)."""
    def best_at_max(searcher):
        log = drive(searcher, 150)
        return min(r.value for j, r in log if r.ok and j.budget == 27)

    bohb = [best_at_max(BOHB(SPACE, min_budget=1, max_budget=27, eta=3, seed=s)) for s in range(8)]
    rand = [best_at_max(RandomSearch(SPACE, min_budget=1, max_budget=27, eta=3, seed=s)) for s in range(8)]
    assert np.mean(bohb) < np.mean(rand)
