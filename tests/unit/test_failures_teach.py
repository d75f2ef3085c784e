"""Failures teach the searcher (issue 59): a failed configuration counts as the worst result
in every model (the TPE's split, the Gaussian processes of BOHB and FreezeThaw, the paper's
KDE), so a region that fails stops being proposed, and a search over a space where half of
one parameter's range fails ends as well as over the same space without that half."""

import functools
import logging
import math
import statistics

import numpy as np
import pytest

import hpo
from hpo.search import BOHB, FreezeThaw
from hpo.search.surrogates.config_gp import ConfigGP
from hpo.search.surrogates.kde import Dimension
from hpo.search.surrogates.tpe import MultiFidelityTPESampler
from hpo.space import SearchSpace

SEEDS = (0, 1, 2)


def space(units_high: int) -> dict:
    return {"units": {"type": "int", "low": 16, "high": units_high},
            "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
            "x": {"type": "float", "low": 0.0, "high": 1.0}}


FAILING, CLEAN = space(240), space(128)     # in FAILING, units > 128 (half the range) raise


def objective(config, budget):
    """Best at units 110, near the edge of what works; more budget, lower loss."""
    if config["units"] > 128:
        raise ValueError(f"units={config['units']} does not fit in memory")
    return ((math.log10(config["lr"]) + 2.5) ** 2 / 4 + (config["x"] - 0.3) ** 2
            + ((config["units"] - 110) / 100) ** 2 + 0.5 / budget)


def outcome(make, space_dict, seed, jobs):
    """(best value at the top budget reached, share of failed jobs in the second half) of an
    ask/tell search."""
    searcher = make(SearchSpace.from_dict(space_dict), seed=seed, min_budget=1, max_budget=27, eta=3)
    failed = []
    for _ in range(jobs):
        job = searcher.ask()
        try:
            value = objective(job.config, job.budget)
        except ValueError:
            value = None
        failed.append(value is None)
        searcher.tell(job, value)
    return searcher.best[1].value, sum(failed[jobs // 2:]) / (jobs - jobs // 2)


def within_seed_noise(failing: list[float], clean: list[float]) -> bool:
    """The failing space's mean best is no worse than the clean space's by more than the clean
    seeds' spread (their standard deviation) plus a quarter."""
    return statistics.mean(failing) <= statistics.mean(clean) * 1.25 + statistics.stdev(clean)


@pytest.mark.slow
def test_a_search_through_optimize_finishes_and_ends_as_well_as_without_the_failing_half(caplog):
    caplog.set_level(logging.ERROR)          # 'trial N failed' warnings, one per failure
    best = {}
    for name, space_dict in (("failing", FAILING), ("clean", CLEAN)):
        results = [hpo.optimize(objective, space_dict, "bohb", min_budget=1, max_budget=27, max_trials=150,
                                seed=seed) for seed in SEEDS]
        assert all(r.stopped_because == "max_trials" for r in results)     # no run of 10 failures
        best[name] = [r.best_value for r in results]
        if name == "failing":
            late = [t for r in results for t in r.trials[75:]]
            assert sum(t.state.value == "failed" for t in late) / len(late) < 0.15
    assert within_seed_noise(best["failing"], best["clean"]), best


# Each model and the jobs it is given: FreezeThaw spends its first jobs on few lineages, and
# at 150 jobs its best was 1.3 times the clean space's (0.028 against 0.022 over six seeds);
# at 300 the two match (0.0201 and 0.0202).
MODELS = {"bohb_gp": (BOHB, 150), "bohb_tpe": (functools.partial(BOHB, model="tpe"), 150),
          "bohb_paper_kde": (functools.partial(BOHB, model="kde"), 150), "freeze_thaw": (FreezeThaw, 300)}


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_model_stops_proposing_the_failing_half(model):
    make, jobs = MODELS[model]
    failing = [outcome(make, FAILING, seed, jobs) for seed in SEEDS]
    clean = [outcome(make, CLEAN, seed, jobs)[0] for seed in SEEDS]
    assert statistics.mean(share for _, share in failing) < 0.2
    assert within_seed_noise([b for b, _ in failing], clean), (failing, clean)


def test_the_tpe_puts_a_failed_config_in_g_and_never_in_l():
    space_ = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    sampler = MultiFidelityTPESampler(space_, n_startup=3, rungs="deepest", kernels="independent")
    for x in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
        sampler.observe({"x": x}, 1.0, x)
    sampler.observe_failure({"x": 0.9}, 1.0)
    model = sampler._fit()
    good, bad = model.good[0].mus[:-1], model.bad[0].mus[:-1]     # without the prior component
    assert 0.9 in bad and 0.9 not in good
    assert len(good) + len(bad) == 7


def test_a_config_that_failed_after_succeeding_ranks_last():
    space_ = SearchSpace.from_dict({"x": {"type": "float", "low": 0, "high": 1}})
    sampler = MultiFidelityTPESampler(space_, n_startup=3, rungs="deepest", kernels="independent")
    for x in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
        sampler.observe({"x": x}, 1.0, x)
    sampler.observe_failure({"x": 0.1}, 3.0)         # the best at budget 1, then failed at 3
    model = sampler._fit()
    assert 0.1 not in model.good[0].mus and 0.1 in model.bad[0].mus


def test_the_gaussian_process_scores_every_failure_as_worse_than_any_result():
    vectors = np.linspace(0, 1, 8)[:, None]
    losses = np.array([3.0, 1.0, 2.0, np.inf, 5.0, np.inf, 4.0, 0.5])
    gp = ConfigGP(vectors, losses, [Dimension("c")], np.array([0.0]))
    failed = ~np.isfinite(losses)
    assert np.all(gp.y[failed] == gp.y.max())
    assert gp.y[failed].min() > gp.y[~failed].max()
    np.testing.assert_array_equal(np.argsort(gp.y[~failed]), np.argsort(losses[~failed]))
