import inspect
import re

import numpy as np
import pytest

from hpo.search import BOHB, AsyncBOHB, RandomSearch
from hpo.search.surrogates.bohb_gp import (
    EXPLORE_FROM,
    GP_ONLY_OPTIONS,
    INACTIVE,
    NOISE,
    NOISE_FEW,
    GPSampler,
    inactive_as_nan,
)
from hpo.search.surrogates.kde import KDE, Dimension, dimensions_of, impute
from hpo.search.surrogates.tpe import RHO_MIN
from hpo.space import SearchSpace
from tests.support.searcher_harness import SPACE, drive, objective


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


def test_kde_model_is_fitted_on_the_largest_budget_with_enough_points():
    searcher = BOHB(SPACE, min_budget=1, max_budget=27, eta=3, seed=0, model="kde")
    drive(searcher, 80)
    counts = {b: len(v) for b, v in searcher.sampler.observations.items()}
    enough = [b for b, n in counts.items() if n >= searcher.sampler.min_points_in_model + 2]
    assert searcher.sampler.model_budget == max(enough)


@pytest.mark.parametrize("levels", [4, 10])   # 12 configs (exhausted by the warm-up) and 100
@pytest.mark.parametrize("model, options", [("kde", {"min_points_in_model": 2}), ("tpe", {"n_startup": 5}),
                                            ("gp", {"n_startup": 5})])
def test_no_duplicate_proposals_while_jobs_are_pending(levels, model, options):
    space = {"a": {"type": "choice", "values": list(range(levels))}, "b": {"type": "choice", "values": [0, 1, 2]}}
    if model == "gp":       # the process proposes in ordered spaces only (a choice keeps the TPE's proposals)
        space = {"a": {"type": "int", "low": 0, "high": levels - 1}, "b": {"type": "int", "low": 0, "high": 2}}
    searcher = AsyncBOHB(space, min_budget=1, max_budget=9, eta=3, seed=0, model=model, **options)
    for _ in range(30):  # warm the model at budget 1
        job = searcher.ask()
        searcher.tell(job, job.config["a"] + job.config["b"])
    pending = []
    for _ in range(6):
        job = searcher.ask()
        if job.continues is None:
            pending.append(tuple(sorted(job.config.items())))
    assert len(pending) == len(set(pending))
    if model == "gp":
        assert searcher.sampler._gp is not None      # the process was fitted and asked


# The Gaussian process proposes in numeric and ordered spaces only (a choice or a condition
# keeps the TPE's proposals), so its tests search the harness space's numeric part.
NUMERIC_SPACE = {name: SPACE[name] for name in ("x", "lr", "n")}


def numeric_objective(job):
    return objective({**job.config, "opt": "adam"}, job.budget)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gp", "tpe", "kde"])
def test_bohb_beats_random_search_on_a_smooth_problem(model):
    """Mean best value over 8 seeds after 150 jobs at matched budgets (deterministic seeds)."""
    space, told = (NUMERIC_SPACE, numeric_objective) if model == "gp" else (SPACE, None)

    def best_at_max(searcher):
        log = drive(searcher, 150, told=told)
        return min(r.value for j, r in log if r.ok and j.budget == 27)

    bohb = [BOHB(space, min_budget=1, max_budget=27, eta=3, seed=s, model=model) for s in range(8)]
    bohb_best = [best_at_max(searcher) for searcher in bohb]
    rand = [best_at_max(RandomSearch(space, min_budget=1, max_budget=27, eta=3, seed=s)) for s in range(8)]
    assert np.mean(bohb_best) < np.mean(rand)
    if model == "gp":
        assert all(searcher.sampler._gp is not None for searcher in bohb)     # the process proposed


# --- the multi-fidelity TPE model (model="tpe"; the default "gp" shares all but its proposals) --

def test_parzen_density_integrates_to_one_and_keeps_a_prior():
    from hpo.search.surrogates.tpe import ParzenEstimator
    parzen = ParzenEstimator(np.concatenate([np.linspace(0.08, 0.12, 20), [0.9]]), min_bandwidth=0.01)
    grid = np.linspace(0, 1, 20001)
    density = np.exp(parzen.log_pdf(grid))
    assert ((density[1:] + density[:-1]) / 2 * np.diff(grid)).sum() == pytest.approx(1.0, abs=1e-3)
    assert density[grid.searchsorted(0.5)] > 0.04         # the prior component: no region is ruled out
    samples = parzen.sample(np.random.default_rng(0), 4000)
    assert samples.min() >= 0 and samples.max() <= 1 and np.mean(samples < 0.3) > 0.75



def test_joint_parzen_keeps_values_together_and_integrates_to_one():
    from hpo.search.surrogates.kde import dimensions_of
    from hpo.search.surrogates.tpe import JointParzenEstimator
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "y": {"type": "float", "low": 0, "high": 1}})
    points = np.array([[0.1 + 0.01 * i, 0.9 - 0.01 * i] for i in range(5)] + [[0.9, 0.1]])
    joint = JointParzenEstimator(points, dimensions_of(space), min_bandwidth=0.01)
    grid = (np.arange(200) + 0.5) / 200
    xs, ys = np.meshgrid(grid, grid)
    density = np.exp(joint.log_pdf(np.column_stack([xs.ravel(), ys.ravel()])))
    assert density.mean() == pytest.approx(1.0, abs=0.02)               # the mean over the unit square
    # Values that went together score higher than the same values recombined (as per-dimension
    # estimators would have them, with equal marginals).
    together, apart = joint.log_pdf(np.array([[0.12, 0.88], [0.12, 0.1]]))
    assert together > apart + 2
    samples = joint.sample(np.random.default_rng(0), 2000)
    assert samples.min() >= 0 and samples.max() <= 1
    assert np.mean((samples[:, 0] < 0.3) & (samples[:, 1] < 0.3)) < 0.1


def test_joint_parzen_leaves_inactive_dimensions_out():
    from hpo.search.surrogates.kde import dimensions_of
    from hpo.search.surrogates.tpe import JointParzenEstimator
    space = SearchSpace.from_dict({"kind": {"type": "choice", "values": ["a", "b"]},
                                   "x": {"type": "float", "low": 0, "high": 1, "when": {"kind": "a"}}})
    dims = dimensions_of(space)
    points = np.array([space.to_unit({"kind": "a", "x": 0.2}), space.to_unit({"kind": "b"})])
    joint = JointParzenEstimator(points, dims, min_bandwidth=0.01)
    b = space.to_unit({"kind": "b"})
    assert np.isnan(b[1]) and np.isfinite(joint.log_pdf(b[None, :])).all()
    # Where "x" is inactive for the point of kind b, that point's kernel is uniform along x.
    near, far = joint.log_pdf(np.array([space.to_unit({"kind": "a", "x": v}) for v in (0.2, 0.9)]))
    assert near > far
    samples = joint.sample(np.random.default_rng(1), 500)
    assert set(np.round(samples[:, 0], 6)) <= set(np.round(dims[0].levels, 6))

def test_tpe_ranks_each_config_at_its_deepest_budget():
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    sampler = MultiFidelityTPESampler(space, top_n_percent=5, rungs="deepest")
    # Ten configs at budget 1 with small losses, one promoted to budget 9 with a large loss:
    # the promoted one ranks first (deeper is better), so it alone forms l(x).
    for i in range(10):
        sampler.observe({"x": 0.05 + 0.01 * i}, 1.0, 0.1)
    sampler.observe({"x": 0.9}, 1.0, 0.5)
    sampler.observe({"x": 0.9}, 9.0, 0.8)
    model = sampler._fit()
    assert list(model.good[0].mus[:-1]) == [0.9] and len(model.bad[0].mus) == 11
    assert sampler.stats() == {"model_observations": 11.0, "model_budget": 9.0}


@pytest.mark.parametrize("max_good, good_rows", [(25, 25), (None, 75)])
def test_a_long_search_keeps_exploring_levels_its_first_winners_did_not_have(max_good, good_rows):
    # 500 configs, the best 75 all at k=1 and opt="b": uncapped, l(x) is those 75, and its prior
    # component and kernel widths (what draws another level or choice) shrink to 1/76; capped,
    # the best 25 and 1/26.
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "k": {"type": "int", "low": 1, "high": 8},
                                   "opt": {"type": "choice", "values": ["a", "b", "c"]}})
    sampler = MultiFidelityTPESampler(space, max_good=max_good)
    rng = np.random.default_rng(0)
    for i in range(500):
        if i < 75:
            config, loss = {"x": float(rng.random()), "k": 1, "opt": "b"}, 0.01 * rng.random()
        else:
            config, loss = space.sample(rng), 1 + rng.random()
        sampler.observe(config, 27.0, loss)
    model = sampler._fit()
    assert len(model.good_points) == good_rows
    draws = np.array([[space.from_unit(row)[name] for name in ("k", "opt")]
                      for row in model.sample_good(np.random.default_rng(1), 4000)], dtype=object)
    other_k, other_opt = (draws[:, 0] != 1).mean(), (draws[:, 1] != "b").mean()
    if max_good is None:
        assert other_k < 0.04 and other_opt < 0.04          # 0.022 and 0.024
    else:
        assert other_k > 0.06 and other_opt > 0.06          # 0.126 and 0.071


def test_max_good_takes_a_whole_number_of_at_least_one_or_none():
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    for bad in (0, 2.5, True, "25"):
        with pytest.raises(ValueError, match="max_good must be an integer >= 1 or None"):
            MultiFidelityTPESampler(space, max_good=bad)
    assert MultiFidelityTPESampler(space, max_good=30.0).max_good == 30
    assert MultiFidelityTPESampler(space).max_good == 25


def test_reliable_ranking_keeps_the_worse_half_of_a_deep_budget_out_of_the_good_set():
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    sampler = MultiFidelityTPESampler(space, top_n_percent=10)
    for i in range(18):
        sampler.observe({"x": 0.01 * i}, 1.0, 0.1 + 0.01 * i)
    sampler.observe({"x": 0.5}, 9.0, 0.2)             # deep and good
    sampler.observe({"x": 0.9}, 9.0, 0.8)             # deep but the worse half of budget 9
    model = sampler._fit()
    assert list(model.good[0].mus[:-1]) == [0.0, 0.5]    # budget 9's better half, then budget 1's best


def test_a_budget_whose_winners_lose_above_is_left_out_of_the_model():
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    sampler = MultiFidelityTPESampler(space, top_n_percent=20)
    # At budget 1 small x looks best; the winners, promoted to 9, lose to every config that
    # started at 9 (where large x is best): budget 1 misleads and drops out.
    for i in range(12):
        sampler.observe({"x": 0.05 * i}, 1.0, 0.05 * i)
    for i in range(4):
        sampler.observe({"x": 0.05 * i}, 9.0, 1.0 - 0.05 * i)
        sampler.observe({"x": 0.8 + 0.05 * i}, 9.0, 0.1 + 0.01 * i)
    model = sampler._fit()
    assert sampler.rung_trusted == {1.0: 0.0, 9.0: 1.0}
    # Budget-9 results only, so joint kernels (`kernels="auto"`): each point's row, then the prior's.
    assert model.kernels == "joint" and model.good.n + model.bad.n == 8
    assert all(mu >= 0.8 for mu in model.good.mus[:-1, 0])
    assert sampler.stats()["rung_trusted/1"] == 0.0


@pytest.mark.parametrize("budgets, budget_one_agrees, choices, rungs, kernels", [
    ((1.0, 3.0, 9.0), False, False, "reliable", "joint"),      # two of three trusted, numbers only
    ((1.0, 3.0, 9.0), False, True, "reliable", "independent"),  # the same with a choice in the space
    ((1.0, 3.0, 9.0), True, False, "reliable", "independent"),  # every budget trusted
    ((1.0, 3.0, 9.0), False, False, "deepest", "independent"),  # no guard, no judging
    ((3.0, 9.0), True, False, "reliable", "independent"),       # two budgets, both trusted
])
def test_auto_kernels_turn_joint_where_at_most_two_budgets_are_trusted(budgets, budget_one_agrees, choices,
                                                                       rungs, kernels):
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    extra = {"c": {"type": "choice", "values": ["a", "b"]}} if choices else {}
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "y": {"type": "float", "low": 0, "high": 1}, **extra})
    sampler = MultiFidelityTPESampler(space, rungs=rungs)
    sign = 1.0 if budget_one_agrees else -1.0

    def loss(config, budget):     # small x best, except at budget 1 when it is reversed
        return (sign if budget == 1.0 else 1.0) * config["x"]

    # Eight configs climb every budget; six more stop below the top, so the model keeps
    # configs of two budgets.
    for i in range(8):
        config = {"x": (i + 0.5) / 8, "y": 0.5, **({"c": "a"} if choices else {})}
        for budget in budgets:
            sampler.observe(config, budget, loss(config, budget))
    for i in range(6):
        config = {"x": (i + 0.25) / 6, "y": 0.3, **({"c": "b"} if choices else {})}
        for budget in budgets[:-1]:
            sampler.observe(config, budget, loss(config, budget) + 0.01)
    model = sampler._fit()
    if rungs == "reliable":
        assert sampler.rung_trusted == {b: float(b != 1.0 or budget_one_agrees) for b in budgets}
    assert model.kernels == kernels


def test_tpe_handles_conditionals_and_concentrates_on_the_good_region():
    rng = np.random.default_rng(0)
    space = SearchSpace.from_dict({"opt": {"type": "choice", "values": ["a", "b"]},
                                   "x": {"type": "float", "low": 0, "high": 1},
                                   "m": {"type": "float", "low": 0, "high": 1, "when": {"opt": "b"}}})
    searcher = BOHB(space, min_budget=1, max_budget=9, eta=3, seed=1)
    for _ in range(120):
        job = searcher.ask()
        assert space.contains(job.config)
        loss = (job.config["x"] - 0.2) ** 2 + (0.0 if job.config["opt"] == "b" else 0.3) + job.config.get("m", 0) * 0.1
        searcher.tell(job, loss + rng.normal(0, 0.001))
    late = [j.config for j, _ in searcher.history[-40:] if j.continues is None]
    assert np.mean([c["opt"] == "b" for c in late]) > 0.6
    assert np.mean([abs(c["x"] - 0.2) < 0.2 for c in late]) > 0.6


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match="model must be one of"):
        BOHB(SPACE, model="nope")


def test_configs_starting_at_a_budget_few_have_reached_are_random_probes():
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    rng = np.random.default_rng(0)
    for probes, spread in ((True, 0.2), (False, 0.0)):
        sampler = MultiFidelityTPESampler(space, n_startup=5, probe_budgets=probes)
        for i in range(30):                                  # budget 1 only: small x is good
            sampler.observe({"x": i / 30}, 1.0, i / 30)
        low = [sampler.propose(rng, 1.0, [])["x"] for _ in range(30)]
        high = [sampler.propose(rng, 27.0, [])["x"] for _ in range(30)]
        assert np.mean(low) < 0.3                              # the model, at the budget it knows
        if probes:
            assert np.std(high) > spread and np.mean(high) > 0.3    # uniform probes at budget 27
        else:
            assert np.mean(high) < 0.3


def test_probes_spread_over_the_branches_of_a_choice():
    from hpo.search.surrogates.tpe import MultiFidelityTPESampler
    space = SearchSpace.from_dict({"branch": {"type": "choice", "values": ["a", "b", "c"]},
                                   "x": {"type": "float", "low": 0, "high": 1}})
    sampler = MultiFidelityTPESampler(space, n_startup=5)
    for i in range(20):
        sampler.observe({"branch": "a", "x": i / 20}, 1.0, i / 20)
    rng = np.random.default_rng(0)
    pending = []
    for _ in range(3):                                # three probes asked together at budget 27
        pending.append(sampler.propose(rng, 27.0, pending))
    assert sorted(c["branch"] for c in pending) == ["a", "b", "c"]


# --- rank agreement between budgets (hpo.search.surrogates.rung_agreement) ------------------------------

def test_features_give_choice_and_inactive_distances_of_one():
    from hpo.search.surrogates.rung_agreement import features
    space = SearchSpace.from_dict({"opt": {"type": "choice", "values": ["a", "b", "c"]},
                                   "m": {"type": "float", "low": 0, "high": 1, "when": {"opt": "b"}}})
    rows = np.array([space.to_unit(c) for c in ({"opt": "a"}, {"opt": "c"}, {"opt": "b", "m": 0.25},
                                                 {"opt": "b", "m": 0.75})])
    f = features(rows, dimensions_of(space), [False, True])
    squared = ((f[:, None, :] - f[None, :, :]) ** 2).sum(axis=2)
    assert squared[0, 1] == pytest.approx(1.0)                  # two choices, both without m
    assert squared[2, 3] == pytest.approx(0.25)                 # same choice, m 0.5 apart
    assert squared[0, 2] >= 2.0                                 # another choice, and m switched on


@pytest.mark.parametrize("reversed_above, sign", [(False, 1), (True, -1)])
def test_agreement_is_read_from_fresh_configs_at_the_upper_budget(reversed_above, sign):
    from hpo.search.surrogates.rung_agreement import agreement, features
    dims = [Dimension("c")]
    lower = np.linspace(0, 1, 30)[:, None]                      # budget 1: small x is good
    # The upper budget holds the three promoted winners and eight fresh configs spread over x.
    upper = np.concatenate([lower[:3], np.linspace(0.1, 1, 8)[:, None]])
    upper_losses = 1 - upper[:, 0] if reversed_above else upper[:, 0]
    rho = agreement((features(lower, dims), lower[:, 0]), (features(upper, dims), upper_losses))
    assert sign * rho > 0.9


def _trap(config, budget, reversal):
    """Best x at 0.9 at budget 27; with `reversal`, best at 0.1 at budget 1 (log-linear in between)."""
    centre = 0.9 - (0.8 * (1 - np.log(budget) / np.log(27)) if reversal else 0.0)
    return (config["x"] - centre) ** 2 + 0.2 * config["y"]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gp", "tpe"])
def test_bohb_skips_brackets_that_start_where_the_ranking_misleads(model):
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    for seed in range(3):
        late_starts_at_one = {}
        for reversal in (False, True):
            searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=seed, model=model)
            log = []
            for _ in range(420):
                job = searcher.ask()
                searcher.tell(job, _trap(job.config, job.budget, reversal))
                log.append(job)
            rho = searcher.sampler.rung_agreement[1.0]
            if reversal:
                assert rho < RHO_MIN and not searcher.sampler.trusted_start(1.0)
                assert searcher.stats()["rung_trusted/1"] == 0.0
            else:
                assert rho >= RHO_MIN and searcher.sampler.trusted_start(1.0)
            # New configs that start at budget 1 in the last 150 jobs (the climb is long
            # over): two of Hyperband's 27-config brackets without the reversal. The
            # agreement is judged afresh as results arrive, so a reversed budget can look
            # trusted for a while and one bracket start there: fewer, not none.
            late_starts_at_one[reversal] = sum(1 for j in log[-150:] if j.continues is None and j.budget == 1.0)
        assert late_starts_at_one[True] < late_starts_at_one[False]


@pytest.mark.parametrize("model", ["gp", "tpe"])
def test_where_every_lower_budget_misleads_new_configs_start_at_the_top(model):
    """After the opening climb shows every budget below 27 reversed, no bracket starts below
    the top (none of Hyperband's, in this iteration or the next): only the full-budget bracket
    of the second iteration runs, each config starting at 27, where its result informs the next."""
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0, model=model)
    log = []
    for _ in range(24 + 30):
        job = searcher.ask()
        centre = 0.9 if job.budget == 27 else 0.1
        searcher.tell(job, (job.config["x"] - centre) ** 2 + 0.1 * job.config["y"])
        log.append(job)
    assert all(searcher.sampler.rung_trusted[b] == 0.0 for b in (1.0, 3.0, 9.0))
    assert [(j.budget, j.continues) for j in log[24:]] == [(27.0, None)] * 30

@pytest.mark.parametrize("options, fragment", [
    ({"model": "kde"}, "model='tpe'"),
    ({"objectives": [{"name": "a", "direction": "minimize"}, {"name": "b", "direction": "minimize"}]},
     "one objective"),
    ({"max_budget": 3}, "here 2"),
])
def test_climbers_asked_for_where_no_climb_runs_are_an_error(options, fragment):
    space = {"x": {"type": "float", "low": 0, "high": 1}}
    settings = {"min_budget": 1, "max_budget": 27, "eta": 3, **options}
    with pytest.raises(ValueError, match=re.escape(fragment)):
        BOHB(space, climbers=6, **settings)
    BOHB(space, climbers=0, **settings)                  # none asked for: no error


def test_bohb_opens_with_a_climbing_bracket_whose_configs_all_reach_the_top():
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0)
    jobs = []
    for _ in range(24):                                        # 6 climbers x 4 rungs
        job = searcher.ask()
        searcher.tell(job, _trap(job.config, job.budget, False))
        jobs.append(job)
    starts = [j for j in jobs if j.continues is None]
    assert len(starts) == 6 and {j.budget for j in starts} == {1.0}
    # Every climber continues through 3, 9 and 27 whatever it scored: 18 continuations.
    assert sorted(j.budget for j in jobs if j.continues is not None) == [3.0] * 6 + [9.0] * 6 + [27.0] * 6
    # Then Hyperband's order: the most aggressive bracket; without climbers, Hyperband's order from the start.
    assert searcher.ask().bracket == 3
    assert BOHB(space, seed=0, climbers=0).ask().bracket == 3
    # The first iteration: the climb (24 jobs) and Hyperband's brackets but the full-budget one
    # (40 + 17 + 8), which Keras Tuner's one-iteration trial count follows; with two budgets
    # a climb would cost more than the whole iteration, and there is none.
    assert searcher.first_iteration_jobs() == 24 + 40 + 17 + 8
    assert BOHB(space, seed=0, climbers=0).first_iteration_jobs() == 40 + 17 + 8 + 4
    # The climb runs once: later iterations are Hyperband's, full-budget bracket (s=0) last.
    plans = [searcher._plan_at(p) for p in range(12)]
    assert plans[0] is searcher._climb and searcher._climb not in plans[1:]
    assert [plan.s for plan in plans[1:]] == [3, 2, 1] + [3, 2, 1, 0] * 2
    assert plans[7].rungs[0].budget == 27.0
    assert BOHB(space, seed=0, max_budget=3).ask().continues is None and BOHB(space, max_budget=3)._climb is None


def test_where_nothing_resumes_bohb_runs_hyperbands_brackets_with_no_climb_and_no_probes():
    """resumes=False: a promotion costs its full budget, so no climbing bracket (each climber
    would pay 1 + 3 + 9 + 27) and no random probes at the top budget (few configs reach it)."""
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0, resumes=False)
    assert searcher._climb is None and not searcher.sampler.probe_budgets
    assert [searcher._plan_at(p).s for p in range(8)] == [3, 2, 1, 0] * 2
    assert searcher.first_iteration_jobs() == 40 + 17 + 8 + 4
    jobs = [job for job, _ in drive(searcher, 40 + 17 + 8 + 4, told=lambda j: _trap(j.config, j.budget, False))]
    assert [j.budget for j in jobs[:27]] == [1.0] * 27 and {j.bracket for j in jobs[:27]} == {3}
    # The full-budget bracket's configs are the model's, not probes: 16 configs have results
    # (at any budget) by then, while only 3 reached the top.
    top_starts = [j for j in jobs if j.bracket == 0]
    assert len(top_starts) == 4 and all(j.budget == 27.0 and j.continues is None for j in top_starts)
    from hpo.search.base import config_key
    assert all(searcher.sampler._modelled.get(config_key(j.config)) == 27.0 for j in top_starts)
    # Where promotions continue (the default), the same bracket's configs are probes.
    probing = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0, climbers=0)
    jobs = [job for job, _ in drive(probing, 40 + 17 + 8 + 4, told=lambda j: _trap(j.config, j.budget, False))]
    assert not any(config_key(j.config) in probing.sampler._modelled for j in jobs if j.bracket == 0)
    # Either is still there by name; and the default keeps both. The process is fitted on
    # every trusted budget either way (`fit_on="joint"`), "top" by name.
    asked = BOHB(space, seed=0, resumes=False, climbers=6, probe_budgets=True, fit_on="top")
    assert asked._climb is not None and asked.sampler.probe_budgets and asked.sampler.fit_on == "top"
    default = BOHB(space, seed=0)
    assert default.resumes and default._climb is not None and default.sampler.probe_budgets
    assert default.sampler.fit_on == "joint" and searcher.sampler.fit_on == "joint"
    # Several objectives take the Pareto TPE, which has no process to fit: no "joint" there.
    two = [{"name": "a", "direction": "minimize"}, {"name": "b", "direction": "minimize"}]
    assert not BOHB(space, seed=0, resumes=False, objectives=two).sampler.probe_budgets
    assert BOHB(space, seed=0, resumes=False, model="kde")._climb is None
    with pytest.raises(ValueError, match="resumes"):
        BOHB(space, resumes="no")


def test_where_nothing_resumes_the_process_learns_from_every_trusted_budget_and_proposes_for_the_top():
    """resumes=False, where the default `fit_on="joint"` matters most: the top budget holds too
    few results for `fit_on="top"` (8 after the first iteration, n_startup 10), which then fits
    the process on the largest lower budget with enough (budget 9 here, 13 results), whatever
    the rung agreement says of it. With a reversal (best x at 0.1 at budget 1, 0.9 at 27) the
    default, "joint", fits the trusted budgets' results with the budget as an input: the
    full-budget bracket's configs land nearer the top budget's optimum."""
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    distance = {}
    for fit_on in ("joint", "top"):
        per_seed = []
        for seed in range(6):
            searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=seed, resumes=False,
                            **({} if fit_on == "joint" else {"fit_on": "top"}))
            assert searcher.sampler.fit_on == fit_on
            jobs = [job for job, _ in drive(searcher, 40 + 17 + 8 + 4, told=lambda j: _trap(j.config, j.budget, True))]
            assert len(searcher.sampler.by_budget[27.0]) < searcher.sampler.n_startup
            rows, _ = searcher.sampler._rows_to_fit()
            sampler = searcher.sampler
            if fit_on == "joint":       # every trusted budget's results, the top's included, and the budget column
                trusted = [b for b in sampler.by_budget if sampler.trusted_start(b)]
                assert 27.0 in trusted and 1.0 in rows[:, -1]
                assert len(rows) == sum(len(sampler.by_budget[b]) for b in trusted)
            else:                       # one lower budget's rows, no budget column
                assert rows.shape[1] == 2
            per_seed.append(np.mean([abs(j.config["x"] - 0.9) for j in jobs if j.bracket == 0]))
        distance[fit_on] = float(np.median(per_seed))
    assert distance["joint"] < 0.5 * distance["top"], distance


@pytest.mark.parametrize("model", ["gp", "tpe"])
def test_a_reversal_is_found_by_the_first_climbing_bracket(model):
    """The climbers' own ranks at budget 1 against their results at the top show the
    reversal before any aggressive bracket runs: the next new config does not start at 1."""
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    for seed in range(3):
        searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=seed, model=model)
        for _ in range(24):
            job = searcher.ask()
            searcher.tell(job, _trap(job.config, job.budget, True))
        assert searcher.ask().budget > 1.0
        assert searcher.sampler.rung_agreement[1.0] < RHO_MIN


def test_the_first_random_configs_are_a_latin_hypercube():
    """Each parameter's range is cut into n_startup slices with one of the first n_startup
    configs in each (choices: each value equally often); `initial_design="uniform"` draws them
    independently, and the multi-objective model keeps that."""
    space = {"lr": {"type": "float", "low": 1e-5, "high": 1.0, "log": True},
             "x": {"type": "float", "low": 0, "high": 1}, "kind": {"type": "choice", "values": ["a", "b"]}}
    searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=3, climbers=0)
    n = searcher.sampler.n_startup
    assert searcher.sampler.initial_design == "latin" and n == 10
    units = np.array([searcher.sampler.space.to_unit(searcher.ask().config) for _ in range(n)])
    for j in range(2):
        assert sorted(np.floor(units[:, j] * n).astype(int)) == list(range(n))
    assert sorted(units[:, 2]) == [0.25] * 5 + [0.75] * 5          # the two values, at their slices' centres
    uniform = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=3, climbers=0, initial_design="uniform")
    units = np.array([uniform.sampler.space.to_unit(uniform.ask().config) for _ in range(n)])
    assert len(set(np.floor(units[:, 0] * n).astype(int))) < n
    with pytest.raises(ValueError, match="initial_design"):
        BOHB(space, initial_design="sobol")
    two = [{"name": "a", "direction": "minimize"}, {"name": "b", "direction": "minimize"}]
    assert BOHB(space, objectives=two).sampler.initial_design == "uniform"


@pytest.mark.parametrize("model", ["gp", "tpe"])
def test_bohb_asks_its_sampler_through_the_declared_contract_only(model):
    """What BOHB asks of a sampler is declared on `ConfigSampler`: a sampler that judges no
    budget (the paper's KDE) gets no climbing bracket and trusts every start; the TPE, and
    the Gaussian process built on it, are told of the climb, and a budget they distrust
    starts no bracket."""
    from hpo.search.base import ConfigSampler

    space = {"x": {"type": "float", "low": 0.0, "high": 1.0}}
    kde = BOHB(space, seed=0, min_budget=1, max_budget=9, eta=3, model="kde")
    assert type(kde.sampler).judges_budgets is ConfigSampler.judges_budgets is False
    assert kde.sampler.trusted_start(1.0) and kde._climb is None

    tpe = BOHB(space, seed=0, min_budget=1, max_budget=9, eta=3, model=model)
    assert tpe.sampler.judges_budgets and tpe.sampler.climbing and tpe._climb is not None
    tpe.sampler.trusted_start = lambda budget: budget > 1.0        # the lowest budget misleads
    climb = [tpe.ask() for _ in range(tpe._climb.rungs[0].n_configs)]
    assert {job.budget for job in climb} == {1.0}                   # the climb starts everywhere
    for job in climb:
        tpe.tell(job, job.config["x"])
    while (job := tpe.ask()) is not None and job.bracket == climb[0].bracket:
        tpe.tell(job, job.config["x"])
    assert job is not None and job.budget > 1.0, "the bracket starting on the distrusted budget was skipped"


# --- the Gaussian-process proposals (model="gp") ------------------------------------

@pytest.mark.parametrize("candidates", ["tpe", "uniform"])
def test_the_gp_model_proposes_by_expected_improvement_once_it_has_results(candidates):
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "y": {"type": "float", "low": 0, "high": 1}})
    searcher = BOHB(space, min_budget=1, max_budget=9, eta=3, seed=0, model="gp", candidates=candidates,
                    fit_on="top")
    assert isinstance(searcher.sampler, GPSampler) and searcher.sampler.fit_on == "top"
    # 200 jobs: the process fits the top budget's results only, about 35 of them here.
    drive(searcher, 200, told=lambda j: (j.config["x"] - 0.7) ** 2 + (j.config["y"] - 0.2) ** 2)
    sampler = searcher.sampler
    assert sampler._gp is not None and sampler.stats()["gp_rows_fitted"] >= sampler.n_startup
    best, _ = searcher.best          # near the optimum at (0.7, 0.2)
    assert abs(best.config["x"] - 0.7) + abs(best.config["y"] - 0.2) < 0.05


def test_the_joint_rows_are_every_trusted_result_with_its_budget_older_first_and_the_top_last():
    """`fit_on="joint"` rows, built from array slices, against the rule written out one result
    at a time: every result at a trusted budget that did not fail, its config's vector and its
    budget (log scale, 0 the lowest such budget, 1 the highest), the top budget's rows last."""
    import math

    searcher = BOHB(SPACE, min_budget=1, max_budget=27, eta=3, seed=2, model="gp", fit_on="joint")
    drive(searcher, 160, fail_every=9)
    sampler = searcher.sampler
    assert sampler._failed, "the check needs failures among the results"
    trust = sampler._reliability()
    budgets = sorted(b for b in sampler.by_budget if trust.get(b, 1.0) > 0)
    assert len(budgets) >= 3
    low, high = math.log(budgets[0]), math.log(budgets[-1])
    expected = []
    for b in budgets:
        for key, (loss, _) in sampler.by_budget[b].items():
            if key not in sampler._failed:
                top_last = sampler._rows[key] + (b == budgets[-1]) * len(sampler._rows)
                expected.append((top_last, [*sampler.deepest[key][2], (math.log(b) - low) / (high - low)], loss))
    expected.sort(key=lambda row: row[0])
    vectors, losses = sampler._joint_rows()
    np.testing.assert_array_equal(vectors, np.array([row[1] for row in expected]))
    np.testing.assert_array_equal(losses, np.array([row[2] for row in expected]))


def test_gp_with_a_small_noise_refines_around_a_sharp_optimum_instead_of_exploring_the_edges():
    # One narrow well in a flat cube, noise-free (as MFHartmann at its top fidelity): with
    # FreezeThaw's noise of 0.1 the process smoothed the best results away, and expected
    # improvement went to the edges, where it knew least (benchmarks/RESULTS.md); this test
    # fails with noise=0.1.
    space = SearchSpace.from_dict({n: {"type": "float", "low": 0, "high": 1} for n in "abc"})
    centre = np.array([0.3, 0.6, 0.45])
    def told(job):
        x = np.array([job.config[n] for n in "abc"])
        return -float(np.exp(-40 * ((x - centre) ** 2).sum()))
    searcher = BOHB(space, min_budget=1, max_budget=1, eta=3, seed=0, model="gp", noise=1e-3)
    log = drive(searcher, 100, told=told)
    late = np.array([[job.config[n] for n in "abc"] for job, _ in log[60:]])
    assert min(result.value for _, result in log) < -0.99
    assert ((late < 0.02) | (late > 0.98)).any(axis=1).mean() < 0.4


def test_gp_noise_is_large_with_few_rows_and_small_with_many_unless_fixed():
    sampler = GPSampler(SearchSpace.coerce(SPACE))
    assert sampler.row_noise(10) == NOISE_FEW
    assert NOISE <= sampler.row_noise(132) < NOISE_FEW / 20
    assert sampler.row_noise(1000) == NOISE
    assert GPSampler(SearchSpace.coerce(SPACE), noise=0.05).row_noise(132) == 0.05


def test_gp_proposals_repeat_for_a_seed_and_differ_between_seeds():
    def run(seed):
        searcher = BOHB(NUMERIC_SPACE, min_budget=1, max_budget=27, eta=3, seed=seed, model="gp")
        configs = [tuple(sorted(j.config.items())) for j, _ in drive(searcher, 80, told=numeric_objective)]
        assert searcher.sampler._gp is not None          # the process proposed
        return configs
    assert run(3) == run(3) != run(4)


def test_gp_model_reads_an_inactive_parameter_outside_the_cube_and_keeps_the_tpe_for_a_bare_choice():
    space = SearchSpace.from_dict({"kind": {"type": "choice", "values": ["a", "b"]},
                                   "x": {"type": "float", "low": 0, "high": 1, "when": {"kind": "a"}}})
    searcher = BOHB(space, min_budget=1, max_budget=9, eta=3, seed=0, model="gp")
    jobs = drive(searcher, 80, told=lambda j: j.config.get("x", 0.5))
    assert all(space.contains(job.config) for job, _ in jobs)
    # A conditional space: the process proposes, x read as INACTIVE (outside [0, 1]) where kind is b.
    model = searcher.sampler._gp[1]
    b_rows = model.x[:, 0] > 0.5                       # kind's unit value: a 0.25, b 0.75
    assert b_rows.any() and np.all(model.x[b_rows, 1] == INACTIVE) and INACTIVE < 0
    assert np.all((model.x[~b_rows, 1] >= 0) & (model.x[~b_rows, 1] <= 1))
    # An unordered choice, unconditional: the TPE proposes (the process cannot tell which
    # parameters the choice switches off).
    flat = SearchSpace.from_dict({"kind": {"type": "choice", "values": ["a", "b", "c"]},
                                  "x": {"type": "float", "low": 0, "high": 1}})
    searcher = BOHB(flat, min_budget=1, max_budget=9, eta=3, seed=0, model="gp")
    drive(searcher, 80, told=lambda j: j.config["x"] + (j.config["kind"] != "b"))
    assert searcher.sampler._gp is None
    with pytest.raises(ValueError, match="fit_on"):
        GPSampler(SearchSpace.coerce(SPACE), fit_on="everything")
    with pytest.raises(ValueError, match="noise"):
        GPSampler(SearchSpace.coerce(SPACE), noise=0)


def test_inactive_as_nan_marks_what_decoding_leaves_out():
    space = SearchSpace.coerce(SPACE)
    points = np.random.default_rng(0).random((200, len(space.params)))
    momentum = [p.name for p in space.params].index("momentum")
    points[::5, momentum] = np.nan                 # a neighbour whose parent switched it on
    decoded = np.array([space.to_unit(space.from_unit(row)) for row in points])
    marked = inactive_as_nan(space, points)
    assert np.array_equal(np.isnan(marked), np.isnan(decoded))
    active = ~np.isnan(marked)
    switched_on = np.isnan(points[:, momentum]) & active[:, momentum]
    assert switched_on.any() and np.all(marked[switched_on, momentum] == 0.5)


def test_gp_is_fitted_on_a_capped_number_of_rows_and_refits_its_lengthscales_rarely():
    from hpo.search.surrogates import bohb_gp
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    # One budget: every result counts. The wide candidates play no part in the cap or the
    # refits, and would only make the 400 asks slower.
    searcher = BOHB(space, min_budget=1, max_budget=1, eta=3, seed=0, model="gp", explore_from=None)
    fits = []
    original = bohb_gp.ConfigGP._fit
    def counting(self, start):
        fits.append(len(self.y))
        return original(self, start)
    bohb_gp.ConfigGP._fit = counting
    try:
        drive(searcher, 400, told=lambda j: (j.config["x"] - 0.3) ** 2)
    finally:
        bohb_gp.ConfigGP._fit = original
    assert searcher.sampler._gp[1].x.shape[0] == bohb_gp.MAX_GP_ROWS
    assert 3 <= len(fits) <= 20


def test_bohb_defaults_to_the_gp_choosing_among_draws_from_the_tpe_good_density():
    """BOHB's default model: expected improvement over the better half, by l(x) / g(x), of
    draws from the TPE's l(x); it finds the optimum and repeats itself for a seed. AsyncBOHB
    has the same default."""
    space = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1},
                                   "y": {"type": "float", "low": 0, "high": 1}})
    default = BOHB(space, min_budget=1, max_budget=9, eta=3).sampler
    assert isinstance(default, GPSampler) and default.candidates == "tpe" and default.fit_on == "joint"
    asynchronous = AsyncBOHB(space, min_budget=1, max_budget=9, eta=3).sampler
    assert isinstance(asynchronous, GPSampler) and asynchronous.fit_on == "joint"

    def run(seed):
        searcher = BOHB(space, min_budget=1, max_budget=9, eta=3, seed=seed)
        log = drive(searcher, 200, told=lambda j: (j.config["x"] - 0.7) ** 2 + (j.config["y"] - 0.2) ** 2)
        assert searcher.sampler._gp is not None
        best, _ = searcher.best
        assert abs(best.config["x"] - 0.7) + abs(best.config["y"] - 0.2) < 0.05
        return [tuple(sorted(j.config.items())) for j, _ in log]
    assert run(3) == run(3)
    with pytest.raises(ValueError, match="candidates"):
        GPSampler(SearchSpace.coerce(SPACE), candidates="everything")


@pytest.mark.slow
def test_wide_candidates_late_in_a_search_leave_a_basin_the_tpe_draws_lock_onto():
    """A broad basin (0.1 at its centre) and, at a vertex of the cube, a well the first random
    configs almost never hit (0 at the vertex): the TPE's draws stay in the basin in every
    seed; once the (only) budget holds `explore_from` results, uniform draws and neighbours of
    the best configs join them, and expected improvement finds the well in some seeds."""
    names = "abcd"
    space = SearchSpace.from_dict({n: {"type": "float", "low": 0, "high": 1} for n in names})

    def told(job):
        x = np.array([job.config[n] for n in names])
        well = 0.3 * float(np.sqrt(((1 - x) ** 2).sum()))
        return well if well < 0.1 else 0.3 - 0.2 * float(np.exp(-8 * ((x - 0.3) ** 2).sum()))

    def escapes(explore_from):
        found = 0
        for seed in range(6):
            searcher = BOHB(space, min_budget=1, max_budget=1, eta=3, seed=seed, explore_from=explore_from)
            found += min(r.value for _, r in drive(searcher, 60, told=told)) < 0.09
        return found
    assert escapes(None) == 0 and escapes(20) >= 2


def test_the_wide_candidates_wait_for_results_at_the_top_budget():
    """After the climbing bracket the top budget holds 6 results, fewer than n_startup, and the
    next bracket's 27 configs at budget 1 give the process 33 rows there to be fitted on; the
    wide candidates count the top budget's results only, so every proposal up to the
    `explore_from`-th result there (the 8th: about the 80th job) is the TPE candidates' alone."""
    def run(explore_from):
        searcher = BOHB(NUMERIC_SPACE, min_budget=1, max_budget=27, eta=3, seed=0, explore_from=explore_from)
        return [(tuple(sorted(j.config.items())), j.budget) for j, _ in drive(searcher, 160, told=numeric_objective)]
    plain, widened = run(None), run(8)
    eighth_at_top = [i for i, (_, budget) in enumerate(plain) if budget == 27][7]
    assert widened[:eighth_at_top + 1] == plain[:eighth_at_top + 1] and widened != plain


def test_explore_from_defaults_to_thirty_and_is_checked():
    assert GPSampler(SearchSpace.coerce(SPACE)).explore_from == EXPLORE_FROM == 30
    assert GPSampler(SearchSpace.coerce(SPACE), explore_from=None).explore_from is None
    assert GPSampler(SearchSpace.coerce(SPACE), explore_from=np.int64(12)).explore_from == 12
    for bad in (-1, 2.5, "30", True):
        with pytest.raises(ValueError, match="explore_from must be an integer >= 0 or None"):
            GPSampler(SearchSpace.coerce(SPACE), explore_from=bad)


def test_the_refused_options_are_exactly_the_keywords_the_gaussian_process_adds():
    assert GP_ONLY_OPTIONS == set(inspect.signature(GPSampler.__init__).parameters) - {"self", "space", "options"}


@pytest.mark.parametrize("model, options, goals, fragment", [
    ("tpe", {"candidates": "uniform"}, {}, "candidates: options of model 'gp' with one objective and no constraint "
                                           "(here model 'tpe')"),
    ("kde", {"fit_on": "joint", "noise": 0.1}, {}, "fit_on, noise: options of model 'gp'"),
    ("gp", {"candidates": "uniform"}, {"objectives": [{"name": "a", "direction": "minimize"},
                                                      {"name": "b", "direction": "minimize"}]},
     "several objectives or constraints"),
])
def test_gaussian_process_options_elsewhere_are_refused_by_name(model, options, goals, fragment):
    """`candidates`, `fit_on` and `noise` belong to model 'gp' with one objective: another
    model, or several objectives (where 'gp' is the multi-objective TPE), names them."""
    with pytest.raises(ValueError, match=re.escape(fragment)):
        BOHB(NUMERIC_SPACE, min_budget=1, max_budget=9, eta=3, model=model, **options, **goals)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        AsyncBOHB(NUMERIC_SPACE, min_budget=1, max_budget=9, eta=3, model=model, **options, **goals)


def test_where_nothing_resumes_async_bohb_starts_no_probes_on_the_same_schedule():
    """AsyncBOHB takes `resumes` as BOHB does: with False, configs that start at a budget few
    configs reached are the model's, not random probes; it hands out the same budgets."""
    from hpo.search import AsyncBOHB
    from hpo.search.base import config_key
    space = {"x": {"type": "float", "low": 0, "high": 1}, "y": {"type": "float", "low": 0, "high": 1}}
    told = lambda j: _trap(j.config, j.budget, False)
    afresh, resuming = (AsyncBOHB(space, min_budget=1, max_budget=27, eta=3, seed=0, resumes=r) for r in (False, True))
    assert not afresh.resumes and not afresh.sampler.probe_budgets and resuming.sampler.probe_budgets
    runs = {s: [job for job, _ in drive(s, 120, told=told)] for s in (afresh, resuming)}
    assert {j.budget for j in runs[afresh]} == {j.budget for j in runs[resuming]} == {1.0, 3.0, 9.0, 27.0}
    # New configs started at the two top budgets once the initial design is over (its first
    # 10 configs): the model's where nothing resumes, random probes at first where it does.
    def modelled(searcher):
        return [config_key(j.config) in searcher.sampler._modelled for j in runs[searcher]
                if j.continues is None and j.budget >= 9.0 and j.trial_id >= 10]
    assert len(modelled(afresh)) >= 10 and all(modelled(afresh))
    assert not all(modelled(resuming)) and any(modelled(resuming))
    assert AsyncBOHB(space, resumes=False, probe_budgets=True).sampler.probe_budgets
    with pytest.raises(ValueError, match="resumes"):
        AsyncBOHB(space, resumes="no")
