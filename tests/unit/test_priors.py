"""User priors on space parameters (`prior:` / `prior_confidence:`) and how searchers use them."""

from functools import partial

import numpy as np
import pytest

from hpo.errors import ConfigError
from hpo.search import BOHB, Hyperband
from hpo.space import SearchSpace


def space(prior=None, confidence="medium", dims=8):
    extra = {"prior": prior, "prior_confidence": confidence} if prior is not None else {}
    return {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0, **extra} for i in range(dims)}


def bowl(config, budget):
    return sum((v - 0.8) ** 2 for v in config.values()) + 0.5 / budget


def best_at_full_budget(searcher, jobs):
    values = []
    for _ in range(jobs):
        job = searcher.ask()
        value = bowl(job.config, job.budget)
        searcher.tell(job, value)
        if job.budget == 27:
            values.append(value)
    return min(values)


def mean_best(cls, spec, jobs, seeds=10):
    return np.mean([best_at_full_budget(cls(spec, seed=s, min_budget=1, max_budget=27, eta=3), jobs)
                    for s in range(seeds)])


def test_priors_parse_round_trip_and_are_checked():
    spec = {"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True, "prior": 1e-2, "prior_confidence": "high"},
            "units": {"type": "int", "low": 8, "high": 64, "prior": 32},
            "opt": {"type": "choice", "values": ["adam", "sgd"], "prior": "adam"}}
    parsed = SearchSpace.from_dict(spec)
    assert parsed["lr"].prior == 1e-2 and parsed["lr"].prior_confidence == "high"
    assert parsed["units"].prior_confidence == "medium"
    assert SearchSpace.from_dict(parsed.to_dict()).to_dict() == parsed.to_dict()
    with pytest.raises(ConfigError, match=r"space\.lr\.prior"):
        SearchSpace.from_dict({"lr": {**spec["lr"], "prior": 5.0}})
    with pytest.raises(ConfigError, match=r"space\.opt\.prior"):
        SearchSpace.from_dict({"opt": {**spec["opt"], "prior": "rmsprop"}})
    with pytest.raises(ConfigError, match=r"space\.units\.prior_confidence"):
        SearchSpace.from_dict({"units": {**spec["units"], "prior_confidence": "total"}})


def test_sampling_around_a_prior_concentrates_by_confidence():
    rng = np.random.default_rng(0)
    spreads = {}
    for confidence in ("low", "medium", "high"):
        s = SearchSpace.from_dict(space(0.3, confidence, dims=1))
        draws = np.array([s.sample_prior(rng)["x0"] for _ in range(2000)])
        assert draws.min() >= 0 and draws.max() <= 1
        spreads[confidence] = np.median(np.abs(draws - 0.3))
    assert spreads["high"] < spreads["medium"] < spreads["low"] < 0.25
    choice = SearchSpace.from_dict({"c": {"type": "choice", "values": list("abcd"), "prior": "b"}})
    picks = [choice.sample_prior(rng)["c"] for _ in range(2000)]
    assert 0.6 < picks.count("b") / len(picks) < 0.8 and set(picks) == set("abcd")


@pytest.mark.parametrize("cls, jobs, dims", [pytest.param(partial(BOHB, model="tpe"), 80, 8, marks=pytest.mark.slow,
                                                          id="BOHB-tpe-80-8"),
                                           pytest.param(Hyperband, 120, 4, marks=pytest.mark.slow)])
def test_a_good_prior_speeds_the_search_and_a_wrong_one_costs_little(cls, jobs, dims):
    """BOHB's priors live in its TPE (a space with priors keeps the TPE's proposals under
    `model="gp"` too), so the cost of a prior is measured against the TPE without one."""
    # 30 seeds: the best of 80 jobs varies so much between seeds that 10 leave the ratios noisy.
    none = mean_best(cls, space(dims=dims), jobs, seeds=30)
    good = mean_best(cls, space(0.8, dims=dims), jobs, seeds=30)
    wrong = mean_best(cls, space(0.1, "high", dims=dims), jobs, seeds=30)
    assert good < 0.6 * none
    assert wrong < 1.3 * none


def test_the_prior_share_follows_the_evidence():
    shares = {}
    for label, prior in (("good", 0.8), ("wrong", 0.1)):
        searcher = BOHB(space(prior, "high"), seed=0, min_budget=1, max_budget=27, eta=3)
        best_at_full_budget(searcher, 80)
        shares[label] = searcher.sampler.priors.share
    assert shares["good"] >= 0.5 and shares["wrong"] <= 0.1
