"""The TPE's local penalty for pending configs (`batch="penalty"`), used by asynchronous searchers."""

import numpy as np
import pytest

from hpo.search import AsyncBOHB
from hpo.search.surrogates.bohb_gp import GPSampler, inactive_as_nan
from hpo.search.surrogates.tpe import MultiFidelityTPESampler
from hpo.space import SearchSpace
from tests.support.searcher_harness import SPACE, drive, signature

FLOATS = SearchSpace.coerce({f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(3)})


def _fitted(seed=0, model=MultiFidelityTPESampler, **options):
    """A sampler told 60 configs at one budget, the best near (0.3, 0.3, 0.3)."""
    sampler = model(FLOATS, **options)
    rng = np.random.default_rng(seed)
    for _ in range(60):
        config = FLOATS.sample(rng)
        sampler.observe(config, 1.0, sum((v - 0.3) ** 2 for v in config.values()))
    return sampler


@pytest.mark.parametrize("options, message", [({"batch": "liar"}, "batch must be one of"),
                                              ({"batch_scale": 0}, "batch_scale must be a finite number above 0"),
                                              ({"batch_scale": float("inf")}, "batch_scale must be a finite"),
                                              ({"batch_share": 0}, "batch_share must be a number above 0 and at most"),
                                              ({"batch_share": 1.5}, "batch_share must be a number above 0"),
                                              ({"batch_share": True}, "batch_share must be a number above 0"),
                                              ({"batch_share": "half"}, "batch_share must be a number above 0")])
def test_bad_batch_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        MultiFidelityTPESampler(FLOATS, **options)


@pytest.mark.parametrize("model", [MultiFidelityTPESampler, GPSampler])
def test_with_nothing_pending_the_penalty_leaves_every_proposal_as_the_argmax_gives_it(model):
    plain, penalised = _fitted(model=model), _fitted(model=model, batch="penalty", batch_scale=3.0, batch_share=0.5)
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(20):
        assert plain.propose(a, 1.0, []) == penalised.propose(b, 1.0, [])


@pytest.mark.parametrize("model", [MultiFidelityTPESampler, GPSampler])
def test_proposals_keep_away_from_the_pending_configs(model):
    """The TPE's penalty, and the same penalty on the Gaussian process's expected improvement."""
    def nearest(options):
        distances = []
        for seed in range(5):
            sampler, rng = _fitted(seed, model, **options), np.random.default_rng(seed)
            # 16 configs running around the model's peak
            pending = [FLOATS.from_unit(np.full(3, 0.3) + d) for d in np.linspace(-0.02, 0.02, 16)]
            for _ in range(8):
                config = sampler.propose(rng, 1.0, pending)
                point = FLOATS.to_unit(config)
                distances.append(min(np.linalg.norm(point - FLOATS.to_unit(p)) for p in pending))
                pending.append(config)
        return np.median(distances)

    assert nearest({"batch": "penalty", "batch_share": 1.0}) > 2 * nearest({})
    assert nearest({"batch": "penalty"}) > 1.2 * nearest({})       # half the proposals, by default


def test_a_differing_choice_counts_as_far():
    space = SearchSpace.coerce({"x": {"type": "float", "low": 0.0, "high": 1.0},
                                "c": {"type": "choice", "values": ["a", "b"]}})
    sampler = MultiFidelityTPESampler(space, batch="penalty")
    rng = np.random.default_rng(0)
    for _ in range(30):
        config = space.sample(rng)
        sampler.observe(config, 1.0, abs(config["x"] - 0.5))
    model = sampler._fit()
    candidates = np.array([space.to_unit({"x": 0.5, "c": "a"}), space.to_unit({"x": 0.5, "c": "b"})])
    penalty = sampler._pending_penalty(model.good_points, candidates, [{"x": 0.5, "c": "a"}])
    assert penalty[0] < -100 and penalty[1] == 0.0


def test_async_bohb_penalises_by_default_and_one_worker_is_unchanged():
    plain = AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0, model="tpe", batch="argmax")
    tpe = AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0, model="tpe")
    assert (tpe.sampler.batch, tpe.sampler.batch_share) == ("penalty", 0.5) and plain.sampler.batch == "argmax"
    assert signature(drive(plain, 80)) == signature(drive(tpe, 80))       # nothing pending, nothing changes
    assert len(drive(tpe, 80, workers=8)) == 80
    # The default model, the Gaussian process: its expected improvement gets the same penalty
    # (SPACE is conditional, so the process proposes), and one worker asks as without it.
    gp_plain = AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0, batch="argmax")
    gp_default = AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0)
    assert isinstance(gp_default.sampler, GPSampler)
    assert gp_default.sampler.batch == "penalty" and gp_plain.sampler.batch == "argmax"
    assert signature(drive(gp_plain, 80)) == signature(drive(gp_default, 80))
    assert "gp_rows_fitted" in gp_default.sampler.stats()       # the process proposed, not only the TPE
    many = [AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0, model="gp", batch=batch)
            for batch in ("argmax", "penalty")]
    runs = [drive(searcher, 80, workers=8) for searcher in many]
    assert len(runs[1]) == 80 and signature(runs[0]) != signature(runs[1])
    # The Pareto TPE of several objectives was not measured with it, and keeps the argmax.
    assert AsyncBOHB(SPACE, objectives=["a", "b"]).sampler.batch == "argmax"


def test_on_a_conditional_space_a_candidate_on_another_branch_is_not_near_a_pending_config():
    """The process's candidates, inactive values as NaN, against a pending config: the same
    config is penalised, one on another branch (another optimizer, no momentum) is not,
    however close its other values."""
    space = SearchSpace.coerce(SPACE)
    sampler = GPSampler(space, batch="penalty")
    rng = np.random.default_rng(0)
    for _ in range(30):
        config = space.sample(rng)
        sampler.observe(config, 1.0, abs(config["x"] - 2.0))
    pending = {"x": 2.0, "lr": 1e-3, "n": 4, "opt": "sgd", "momentum": 0.5}
    same_branch = dict(pending)
    other_branch = {"x": 2.0, "lr": 1e-3, "n": 4, "opt": "adam"}
    candidates = inactive_as_nan(space, np.array([space.to_unit(same_branch), space.to_unit(other_branch)]))
    penalty = sampler._pending_penalty(sampler._fit().good_points, candidates, [pending])
    assert penalty[0] < -100 and penalty[1] == 0.0
