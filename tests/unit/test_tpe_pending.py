"""How proposals keep away from pending configs, used by asynchronous searchers: the TPE's local
penalty (`batch="penalty"`) and the Gaussian process's Thompson draws (`thompson_from`)."""

import numpy as np
import pytest

from hpo.search import BOHB, AsyncBOHB
from hpo.search.surrogates.bohb_gp import THOMPSON_FROM, GPSampler, inactive_as_nan
from hpo.search.surrogates.config_gp import ConfigGP
from hpo.search.surrogates.kde import Dimension
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


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "32"])
def test_a_bad_thompson_from_is_refused(value):
    with pytest.raises(ValueError, match="thompson_from must be an integer >= 1 or None"):
        GPSampler(FLOATS, thompson_from=value)


def test_thompson_draws_are_the_process_s_alone():
    """A draw needs a posterior: BOHB and AsyncBOHB refuse `thompson_from` with another model or
    several objectives; it takes the penalty's place, so `batch="argmax"` refuses it too, and
    AsyncBOHB's `batch="argmax"` turns its default draws off."""
    for searcher, options in ((AsyncBOHB, {"model": "tpe"}), (BOHB, {"model": "tpe"}), (BOHB, {"model": "kde"}),
                              (AsyncBOHB, {"objectives": ["a", "b"]})):
        with pytest.raises(ValueError, match="thompson_from"):
            searcher(FLOATS, thompson_from=8, **options)
    assert AsyncBOHB(FLOATS, thompson_from=8).sampler.thompson_from == 8
    assert BOHB(FLOATS, batch="penalty", thompson_from=8).sampler.thompson_from == 8
    with pytest.raises(ValueError, match="thompson_from=8 takes the place of batch='penalty'.*got batch='argmax'"):
        BOHB(FLOATS, thompson_from=8)       # BOHB's batch is "argmax" by default
    assert AsyncBOHB(FLOATS, batch="argmax").sampler.thompson_from is None


@pytest.mark.parametrize("model, options", [(MultiFidelityTPESampler, {"batch": "penalty"}),
                                            (GPSampler, {"batch": "penalty"}),
                                            (GPSampler, {"batch": "penalty", "thompson_from": 1})])
def test_with_nothing_pending_every_proposal_is_the_argmax(model, options):
    plain, kept_away = _fitted(model=model), _fitted(model=model, batch_scale=3.0, batch_share=0.5, **options)
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    for _ in range(20):
        assert plain.propose(a, 1.0, []) == kept_away.propose(b, 1.0, [])


@pytest.mark.parametrize("model", [MultiFidelityTPESampler, pytest.param(GPSampler, marks=pytest.mark.slow)])
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
    if model is GPSampler:      # spread by the posterior's uncertainty, not by a distance to them
        assert nearest({"batch": "penalty", "thompson_from": 1}) > 1.4 * nearest({})
        # below `thompson_from`, the penalty on half of them, as without it
        assert nearest({"batch": "penalty", "thompson_from": 100}) == nearest({"batch": "penalty"})


@pytest.mark.slow
def test_a_thompson_draw_follows_the_posterior():
    """Many draws at six points: their mean and covariance are the process's posterior's at
    the `keep` = 5 points of the lowest mean - 2 std, and the sixth reads above every draw."""
    rng = np.random.default_rng(0)
    rows = rng.random((30, 2))
    model = ConfigGP(rows, ((rows - 0.3) ** 2).sum(axis=1), [Dimension("c"), Dimension("c")], None)
    points = np.array([[0.3, 0.3], [0.32, 0.3], [0.9, 0.1], [0.5, 0.5], [0.05, 0.95], [0.31, 0.29]])
    draws = np.array([model.sample(rng, points, keep=5) for _ in range(10000)])
    k_star = model._kernel(points, model.x)
    mean = k_star @ model._alpha
    covariance = model._kernel(points, points) - k_star @ np.linalg.solve(
        model._kernel(model.x, model.x) + np.diag(model.noise), k_star.T)
    left_out = np.argmax(mean - 2 * np.sqrt(np.diag(covariance)))
    kept = np.delete(np.arange(len(points)), left_out)
    assert (draws[:, left_out] > draws[:, kept].max(axis=1)).all()
    # tolerances about four standard errors of 10,000 draws
    assert np.abs(draws[:, kept].mean(axis=0) - mean[kept]).max() < 0.04
    empirical = np.cov(draws[:, kept], rowvar=False)
    assert np.abs(empirical - covariance[np.ix_(kept, kept)]).max() < 0.06
    # the two neighbours of (0.3, 0.3) move together, the far corner apart from them
    correlation = np.corrcoef(draws[:, kept], rowvar=False)
    near = list(kept).index(1)
    far = int(np.argmax(np.linalg.norm(points[kept] - points[0], axis=1)))
    assert correlation[0, near] > 0.9 and abs(correlation[0, far]) < 0.5


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


@pytest.mark.slow
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
    assert (gp_default.sampler.batch, gp_default.sampler.thompson_from) == ("penalty", THOMPSON_FROM)
    assert gp_plain.sampler.batch == "argmax"
    assert signature(drive(gp_plain, 80)) == signature(drive(gp_default, 80))
    assert "gp_rows_fitted" in gp_default.sampler.stats()       # the process proposed, not only the TPE
    many = [AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0, model="gp", **options)
            for options in ({"batch": "argmax"}, {"batch": "penalty", "thompson_from": None},
                            {"batch": "penalty", "thompson_from": 4})]
    runs = [drive(searcher, 80, workers=8) for searcher in many]
    assert all(len(run) == 80 for run in runs) and len({repr(signature(run)) for run in runs}) == 3
    # 8 workers leave fewer than THOMPSON_FROM configs pending: the default asks as the penalty alone
    fresh_default = AsyncBOHB(SPACE, min_budget=1, max_budget=9, eta=3, seed=0)
    assert signature(drive(fresh_default, 80, workers=8)) == signature(runs[1])
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
