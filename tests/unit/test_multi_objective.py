"""Several objectives and constraints: the ranking functions, the told values, the searchers'
promotions and models, and `hpo.optimize`'s Pareto set."""

import itertools
import math

import numpy as np
import pytest

import hpo
from hpo.errors import ConfigError
from hpo.search import ASHA, BOHB, Hyperband, RandomSearch
from hpo.search.multiobjective.objectives import Constraint, Goals, Objective, check_names
from hpo.search.multiobjective.pareto import (
    constrained_order,
    crowding_distance,
    dominates,
    front_tie_break_scores,
    hypervolume_contributions,
    non_dominated_ranks,
    pareto_mask,
)
from hpo.search.multiobjective.pareto_tpe import ParetoTPESampler
from hpo.space import SearchSpace
from hpo.trial import Job, TrialResult, TrialState


def brute_force_ranks(points):
    remaining, ranks, rank = set(range(len(points))), np.zeros(len(points), int), 0
    while remaining:
        front = {i for i in remaining if not any(dominates(points[j], points[i]) for j in remaining)}
        for i in front:
            ranks[i] = rank
        remaining -= front
        rank += 1
    return ranks


# --- pareto ------------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [2, 3, 4])
def test_non_dominated_ranks_match_the_definition(m):
    rng = np.random.default_rng(m)
    for _ in range(60):
        # Small integers: many ties and duplicates, the cases a fast path gets wrong.
        points = rng.integers(0, 4, size=(rng.integers(1, 25), m)).astype(float)
        assert (non_dominated_ranks(points) == brute_force_ranks(points)).all(), points


def test_non_dominated_ranks_limit_ranks_at_least_that_many():
    points = np.array([[0, 3, 0], [1, 2, 1], [2, 1, 2], [3, 3, 3], [4, 4, 4], [5, 5, 5.0]])
    ranks = non_dominated_ranks(points, limit=4)
    assert list(ranks[:4]) == [0, 0, 0, 1] and (ranks[4:] == len(points)).all()


def test_crowding_distance_gives_extremes_infinity_and_scales_by_range():
    points = np.array([[0.0, 4.0], [1.0, 3.0], [3.0, 1.0], [4.0, 0.0]])
    distance = crowding_distance(points)
    assert math.isinf(distance[0]) and math.isinf(distance[3])
    assert distance[1] == pytest.approx(3 / 4 + 3 / 4) and distance[2] == pytest.approx(3 / 4 + 3 / 4)
    assert np.isinf(crowding_distance(points[:2])).all()


def test_hypervolume_contributions_are_the_exclusive_boxes():
    points = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 1.0]])
    contribution = hypervolume_contributions(points, reference=np.array([4.0, 4.0]))
    assert list(contribution) == [1.0 * 1.0, 1.0 * 1.0, 1.0 * 1.0]
    contribution = hypervolume_contributions(np.array([[1.0, 3.0], [1.5, 2.9], [3.0, 1.0]]), np.array([4.0, 4.0]))
    assert contribution[1] == pytest.approx(1.5 * 0.1)
    with pytest.raises(ValueError, match="two objectives"):
        hypervolume_contributions(np.zeros((3, 3)))


@pytest.mark.parametrize("tie_break", ["crowding", "hypervolume"])
@pytest.mark.parametrize("m", [2, 3])
def test_all_fronts_at_once_score_as_front_by_front(tie_break, m):
    rng = np.random.default_rng(m)
    for trial in range(40):
        n = int(rng.integers(1, 40))
        points = rng.integers(0, 5, size=(n, m)).astype(float) if trial % 2 else rng.random((n, m))
        ranks = non_dominated_ranks(points)
        scores = front_tie_break_scores(points, ranks, tie_break)
        for rank in np.unique(ranks):
            members = np.flatnonzero(ranks == rank)
            if len(members) < 2:
                continue
            front = points[members]
            low, high = front.min(axis=0), front.max(axis=0)
            scaled = (front - low) / np.where(high > low, high - low, 1.0)
            one = hypervolume_contributions(scaled) if tie_break == "hypervolume" and m == 2 \
                else crowding_distance(scaled)
            assert np.array_equal(scores[members], one), (points, rank)


@pytest.mark.parametrize("m", [2, 3])
def test_constrained_order_with_a_limit_keeps_the_top_of_the_full_order(m):
    rng = np.random.default_rng(5)
    for _ in range(30):
        losses = rng.integers(0, 6, size=(int(rng.integers(2, 50)), m)).astype(float)
        violations = np.where(rng.random(len(losses)) < 0.2, rng.random(len(losses)), 0.0)
        limit = int(rng.integers(0, len(losses) + 1))
        full = constrained_order(losses, violations)
        limited = constrained_order(losses, violations, limit=limit)
        assert sorted(limited) == list(range(len(losses)))
        assert list(limited[:limit]) == list(full[:limit])


def test_constrained_order_follows_deb():
    losses = np.array([[5.0, 5.0],      # feasible, dominated
                       [1.0, 2.0],      # feasible, front
                       [0.0, 0.0],      # infeasible (violation 2) though it dominates all
                       [2.0, 1.0],      # feasible, front
                       [0.0, 1.0],      # infeasible (violation 0.5)
                       [math.inf, 0.0]])  # failed
    violations = np.array([0, 0, 2.0, 0, 0.5, 0])
    order = list(constrained_order(losses, violations))
    assert set(order[:2]) == {1, 3} and order[2:] == [0, 4, 2, 5]


@pytest.mark.parametrize("tie_break", ["crowding", "hypervolume"])
def test_ties_in_a_front_go_to_the_spread_out_points(tie_break):
    # One front of five: the middle point of a tight cluster is the least useful.
    losses = np.array([[0.0, 10.0], [4.9, 5.1], [5.0, 5.0], [5.1, 4.9], [10.0, 0.0]])
    order = list(constrained_order(losses, tie_break=tie_break))
    assert order[-1] == 2
    assert set(order[:2]) == {0, 4}


def test_pareto_mask_keeps_the_least_violating_when_none_is_feasible():
    losses = np.array([[1.0, 1.0], [0.0, 0.0], [2.0, 0.5]])
    assert list(pareto_mask(losses)) == [False, True, False]
    assert list(pareto_mask(losses, np.array([0.0, 1.0, 0.0]))) == [True, False, True]
    assert list(pareto_mask(losses, np.array([3.0, 1.0, 1.0]))) == [False, True, False]


# --- objectives and constraints ----------------------------------------------------------------

def test_constraints_parse_and_measure_violation():
    c = Constraint.parse("params <= 20000")
    assert (c.name, c.op, c.bound) == ("params", "<=", 20000.0)
    assert c.violation(20000) == 0 and c.violation(30000) == pytest.approx(0.5)
    assert Constraint.parse(" latency_ms<2.5 ").violation(2.5) > 0
    assert Constraint.parse("val_accuracy >= 9e-1").violation(0.8) == pytest.approx(0.1)
    assert math.isinf(c.violation(float("nan")))
    # A name is any text the objective reports under, kept whole and round-tripped by str().
    for name in ["loss[val]", "mean loss (val)", "acc@5", "output_1/val_loss"]:
        parsed = Constraint.parse(f" {name} >= -1.5 ")
        assert (parsed.name, parsed.op, parsed.bound) == (name, ">=", -1.5)
        assert Constraint.parse(str(parsed)) == parsed
    # Every bound reads back as itself; one that :g writes exactly is written as it always was.
    for text, written in [("p <= 20000", "p <= 20000"), ("p <= 1234567", "p <= 1234567"),
                          ("p < 0.123456789", "p < 0.123456789"), ("p >= 2.5e-07", "p >= 2.5e-07"),
                          ("p > 1e+30", "p > 1e+30")]:
        assert str(Constraint.parse(text)) == written
        assert Constraint.parse(written).bound == Constraint.parse(text).bound
    for bad in ["params", "params <= ", "<= 3", "params == 3", "params <= abc", "params <= 3 4", "a=b <= 3",
                "a < b <= 3"]:
        with pytest.raises(ValueError, match="cannot parse"):
            Constraint.parse(bad)
    with pytest.raises(TypeError):
        Constraint.parse(3)


def test_objectives_infer_or_check_directions():
    assert Objective.coerce("val_accuracy").direction == "maximize"
    assert Objective.coerce("params").direction == "minimize"
    assert Objective.coerce({"name": "params", "direction": "maximize"}).direction == "maximize"
    with pytest.raises(ValueError, match="direction"):
        Objective.coerce({"name": "params", "direction": "smaller"})
    with pytest.raises(ValueError, match="unknown key"):
        Objective.coerce({"name": "params", "dir": "minimize"})
    with pytest.raises(TypeError):
        Objective.coerce(3)
    with pytest.raises(TypeError, match="a list"):
        Goals.build("params")
    with pytest.raises(ValueError, match="at least one"):
        Goals.build([])
    with pytest.raises(ValueError, match="more than once"):
        Goals.build(["a", "a"])
    with pytest.raises(TypeError, match="constraints must be a list"):
        Goals.build(["a", "b"], "a <= 3")


def test_unknown_names_suggest_the_closest():
    goals = Goals.build(["val_acuracy", "params"], ["latency_ms <= 3"])
    with pytest.raises(ValueError, match="did you mean 'val_accuracy'"):
        check_names(goals, ["val_accuracy", "params", "latency_ms"])


def test_told_values_become_a_typed_vector():
    goals = Goals.build(["a", {"name": "b", "direction": "maximize"}], ["c <= 1"])
    result = goals.result_of({"a": 1, "b": 2.5, "c": 3, "extra": 0})
    assert result.values == (1.0, 2.5) and result.value == 1.0 and result.metrics["c"] == 3
    assert list(goals.losses(result)) == [1.0, -2.5] and goals.violation(result) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no 'c'"):
        goals.result_of({"a": 1, "b": 2})
    with pytest.raises(ValueError, match="needs a value"):
        goals.result_of([1.0, 2.0])
    with pytest.raises(TypeError, match="2 objectives"):
        goals.result_of(1.0)
    with pytest.raises(TypeError, match="expected a number"):
        goals.result_of({"a": "x", "b": 1, "c": 0})
    for wrong in (True, np.array([1.0, 2.0]), np.complex128(1 + 2j)):      # named, not numpy's own error
        with pytest.raises(TypeError, match="a: expected a number"):
            goals.result_of({"a": wrong, "b": 1, "c": 0})
    # What a single objective takes, several take too: 0-d arrays, numpy scalars.
    told = goals.result_of({"a": np.array(0.5), "b": np.float32(2.0), "c": np.int64(1)})
    assert told.values == (0.5, 2.0) and goals.violation(told) == 0.0
    two = Goals.build(["a", "b"])
    assert two.result_of(np.array([1.0, 2.0])).values == two.result_of([np.array(1.0), np.array(2.0)]).values
    assert two.result_of((1, 2)).values == (1.0, 2.0)
    with pytest.raises(ValueError, match="told 3 values"):
        two.result_of([1, 2, 3])
    assert not two.result_of([1, float("nan")]).ok
    # What the runner will tell: the metrics, with the objectives among them.
    told = two.result_of(TrialResult(value=1.0, metrics={"a": 1.0, "b": 4.0}))
    assert told.values == (1.0, 4.0)
    missing = two.result_of(TrialResult(value=1.0, metrics={"a": 1.0}))
    assert missing.state == TrialState.FAILED and "'b'" in missing.error


@pytest.mark.parametrize("objectives", [None, ["error", "acc"]])
def test_a_constraint_value_that_is_not_finite_fails_the_trial(objectives):
    searcher = BOHB(SPACE, min_budget=1, max_budget=9, seed=0, objectives=objectives, constraints=["p <= 10"])
    named = ["objective"] if objectives is None else objectives
    low = searcher.ask()
    searcher.tell(low, {**{n: 0.3 for n in named}, "p": 5})
    high = next(job for job in iter(searcher.ask, None) if job.budget > low.budget)
    searcher.tell(high, {**{n: 0.2 for n in named}, "p": float("nan")})
    told = searcher.history[-1][1]
    assert told.state == TrialState.FAILED and "'p' was nan" in told.error
    # The feasible result stays the best and the front, a failed one at a larger budget aside.
    assert searcher.best[0].trial_id == low.trial_id
    assert [job.trial_id for job, _ in searcher.pareto_front()] == [low.trial_id]


def test_a_told_trial_result_lacking_a_goal_is_refused_and_the_job_stays_pending():
    searcher = ASHA(SPACE, min_budget=1, max_budget=9, seed=0, objectives=["a", "b"], constraints=["p <= 1"])
    job = searcher.ask()
    for metrics, missing in [({"a": 0.3, "p": 0}, "'b'"), ({"a": 0.3, "b": 1.0}, "'p'")]:
        with pytest.raises(ValueError, match=f"metrics have no {missing}"):
            searcher.tell(job, TrialResult(0.3, metrics=metrics))
    assert job.trial_id in searcher.pending and not searcher.history
    searcher.tell(job, TrialResult(None, state=TrialState.FAILED, error="diverged"))     # a failure needs none
    assert searcher.history[-1][1].state == TrialState.FAILED


def test_a_single_objective_result_stores_as_before():
    assert TrialResult.coerce(0.5).to_dict() == {"value": 0.5, "state": "complete", "metrics": {}, "error": None}
    assert Goals.build().result_of(0.5) == TrialResult(value=0.5)
    several = TrialResult(value=1.0, values=(1.0, 2.0), metrics={"a": 1.0, "b": 2.0})
    assert TrialResult.from_dict(several.to_dict()) == several


# --- searchers -------------------------------------------------------------------------------

SPACE = {"x": {"type": "float", "low": 0.0, "high": 1.0}}


def test_hyperband_promotes_the_front_and_feasible_configs():
    searcher = Hyperband(SPACE, seed=0, min_budget=1, max_budget=9, eta=3,
                         objectives=["f1", "f2"], constraints=["size <= 1"])
    first = [searcher.ask() for _ in range(9)]
    values = {0: (0, 9, 0), 1: (9, 0, 0), 2: (1, 1, 5), 3: (5, 5, 0), 4: (6, 6, 0),
              5: (7, 7, 0), 6: (8, 8, 0), 7: (4, 4.5, 0), 8: (9, 9, 0)}
    for job in first:
        f1, f2, size = values[job.trial_id]
        searcher.tell(job, {"f1": f1, "f2": f2, "size": size})
    promoted = set()
    while True:
        job = searcher.ask()
        if job is None or job.continues is None:
            break
        promoted.add(job.continues)
    # 3 of 9 go on: the feasible front {0, 1, 7}; 2 dominates them all but breaks the constraint.
    assert promoted == {0, 1, 7}


def test_asha_with_one_objective_and_a_constraint_promotes_feasible_configs_first():
    searcher = ASHA(SPACE, seed=0, min_budget=1, max_budget=9, eta=3, constraints=["objective <= 0.5"],
                    direction="maximize")
    jobs = [searcher.ask() for _ in range(3)]
    for job, value in zip(jobs, [0.9, 0.4, 0.3]):
        searcher.tell(job, value)
    job = searcher.ask()
    assert job.continues == jobs[1].trial_id      # 0.9 is better but infeasible
    assert searcher.best[0].trial_id == jobs[1].trial_id


def test_unknown_searcher_options_and_models_are_refused():
    with pytest.raises(ValueError, match="model 'kde'"):
        BOHB(SPACE, objectives=["a", "b"], model="kde")
    with pytest.raises(ValueError, match="tie_break"):
        RandomSearch(SPACE, objectives=["a", "b"], tie_break="nearest")
    with pytest.raises(ValueError, match="split"):
        BOHB(SPACE, objectives=["a", "b"], split="weighted")


@pytest.mark.parametrize("split", ["rank", "parego"])
def test_the_models_good_configs_are_the_best_ranked(split):
    sampler = ParetoTPESampler(SearchSpace.coerce(SPACE), goals=Goals.build(["a", "b"]), split=split)
    xs = np.linspace(0.05, 0.95, 19)
    for x in xs:
        # Front: a = x, b = 1 - x for x < 0.5; beyond, both worse (dominated).
        a, b = (x, 1 - x) if x < 0.5 else (x + 1, 2 - x + 1)
        sampler.observe_point({"x": float(x)}, 1.0, np.array([a, b]), 0.0)
        sampler.observe({"x": float(x)}, 1.0, a)
    if split == "parego":
        sampler._weights = np.array([0.5, 0.5])
    table = sampler._table[:len(sampler._rows)]
    scores = sampler.split_losses(table[:, 0], table[:, 1])
    front = xs < 0.5
    assert scores[front].max() < scores[~front].min()


def test_the_worse_half_of_a_budget_is_judged_by_rank_among_all_its_results():
    # The first objective's scale (hundreds) is far from a rank's (0..5): the guard must
    # compare ranks, among every result at a budget, promoted configs included.
    sampler = ParetoTPESampler(SearchSpace.coerce(SPACE), goals=Goals.build(["a", "b"]))
    configs = [{"x": i / 10} for i in range(6)]
    told = [(c, 1.0, np.array([100.0 * i, float(i)])) for i, c in enumerate(configs)]
    told += [(configs[0], 3.0, np.array([0.0, 0.0])), (configs[1], 3.0, np.array([50.0, 0.5]))]
    for config, budget, point in told:
        sampler.observe_point(config, budget, point, 0.0)
        sampler.observe(config, budget, float(point[0]))
    table = sampler._table[:len(sampler._rows)]
    worse = sampler._worse_half(table[:, 0], sampler.split_losses(table[:, 0], table[:, 1]))
    # Budget 1: configs 3, 4, 5 past the middle of six; budget 3: config 1 past the middle of two.
    assert list(worse) == [False, True, False, True, True, True]


def test_pareto_front_of_a_searcher_is_not_dominated():
    searcher = RandomSearch(SPACE, seed=1, objectives=["a", "b"])
    for _ in range(40):
        job = searcher.ask()
        x = job.config["x"]
        searcher.tell(job, [x, (1 - x) ** 2 + 0.1 * math.sin(20 * x)])
    front = searcher.pareto_front()
    points = [r.values for _, r in searcher.history]
    assert len(front) >= 2
    for _, r in front:
        assert not any(dominates(np.array(p), np.array(r.values)) for p in points)


# --- hpo.optimize ------------------------------------------------------------------------------

def two_bowls(config, budget):
    x, y = config["x"], config["y"]
    return {"f1": x ** 2 + y ** 2 + 1 / budget, "f2": (x - 2) ** 2 + (y - 1) ** 2, "size": abs(x) * 10}


BOWL_SPACE = {"x": {"type": "float", "low": -4, "high": 4}, "y": {"type": "float", "low": -4, "high": 4}}


@pytest.mark.parametrize("searcher", ["random", "asha", "bohb"])
def test_optimize_returns_a_feasible_non_dominated_set(searcher):
    result = hpo.optimize(two_bowls, BOWL_SPACE, searcher, min_budget=1, max_budget=9, max_trials=60,
                          objectives=["f1", "f2"], constraints=["size <= 15"])
    assert result.best_config is None and [o.name for o in result.objectives] == ["f1", "f2"]
    assert len(result.pareto) >= 2
    top = max(m.budget for m in result.pareto)
    finished = [t for t in result.trials if t.state == TrialState.COMPLETE and t.budget == top]
    for member in result.pareto:
        assert member.feasible and member.metrics["size"] <= 15
        mine = np.array([member.objectives["f1"], member.objectives["f2"]])
        assert not any(dominates(np.array([t.metrics["f1"], t.metrics["f2"]]), mine)
                       for t in finished if t.metrics["size"] <= 15)


def test_optimize_with_one_objective_and_a_constraint_returns_the_best_feasible():
    result = hpo.optimize(two_bowls, BOWL_SPACE, "random", min_budget=1, max_budget=1, max_trials=30,
                          metric="f1", constraints=["size <= 5"])
    feasible = [t for t in result.trials if t.metrics["size"] <= 5]
    assert result.best_value == min(t.value for t in feasible)
    assert [m.trial_id for m in result.pareto] == [min(feasible, key=lambda t: t.value).trial_id]


def test_optimize_fails_trials_that_miss_a_name_and_says_which():
    result = hpo.optimize(two_bowls, BOWL_SPACE, "random", min_budget=1, max_budget=1, max_trials=2,
                          objectives=["f1", "f22"])
    assert all(t.state == TrialState.FAILED for t in result.trials)
    assert "no 'f22'" in result.trials[0].error and "did you mean 'f2'" in result.trials[0].error
    assert result.pareto == ()


def test_optimize_names_a_constraint_value_that_was_not_finite_as_a_constraint_value():
    def unmeasured(config, budget):
        return {"f1": config["x"], "size": float("nan")}
    result = hpo.optimize(unmeasured, BOWL_SPACE, "random", min_budget=1, max_budget=1, max_trials=1,
                          constraints=["size <= 3"], metric="f1")
    assert result.trials[0].error == "the constraint's value 'size' was nan"


@pytest.mark.parametrize("kwargs, kind, match", [
    (dict(objectives=["f1", {"name": "f2", "direction": "down"}]), ValueError, "argument 'objectives'.*direction"),
    (dict(objectives="f1"), TypeError, "argument 'objectives'.*a list"),
    (dict(objectives=[]), ValueError, "at least one"),
    (dict(objectives=["f1", "f2"], constraints=["size < < 3"]), ValueError, "argument 'constraints'.*parse"),
    (dict(objectives=["f1", "f2"], constraints="size < 3"), TypeError, "argument 'constraints'"),
    (dict(objectives=["f1", "f2"], metric="f1"), ValueError, "either metric"),
    (dict(objectives=["f1", "f2"], direction="maximize"), ValueError, "argument 'direction'"),
    (dict(objectives=["f1", "f2"], options={"objectives": []}), ValueError, "argument 'options'"),
])
def test_optimize_refuses_bad_objectives_and_constraints(kwargs, kind, match):
    with pytest.raises(kind, match=match) as info:
        hpo.optimize(two_bowls, BOWL_SPACE, min_budget=1, max_budget=9, **kwargs)
    assert isinstance(info.value, ConfigError)


def test_searcher_construction_is_unchanged_with_one_objective():
    plain = [(j.trial_id, j.config, j.budget) for j in itertools.islice(iter(Hyperband(SPACE, seed=3).ask, None), 5)]
    named = Hyperband(SPACE, seed=3, objectives=[Objective("objective")])
    assert plain == [(j.trial_id, j.config, j.budget) for j in (named.ask() for _ in range(5))]
    assert not named.goals.ranked and isinstance(Job(0, {}, 1.0), Job)


def test_optimize_resumes_a_study_with_several_objectives(tmp_path):
    kwargs = dict(min_budget=1, max_budget=9, objectives=["f1", "f2"], constraints=["size <= 15"],
                  study_dir=tmp_path / "study")
    first = hpo.optimize(two_bowls, BOWL_SPACE, "bohb", max_trials=25, **kwargs)
    resumed = hpo.optimize(two_bowls, BOWL_SPACE, "bohb", max_trials=50, **kwargs)
    fresh = hpo.optimize(two_bowls, BOWL_SPACE, "bohb", max_trials=50, **{**kwargs, "study_dir": tmp_path / "b"})
    assert [t.config for t in resumed.trials[:25]] == [t.config for t in first.trials]
    # Replay rebuilt the searcher exactly: the resumed search is the uninterrupted one.
    assert [(t.config, t.budget) for t in resumed.trials] == [(t.config, t.budget) for t in fresh.trials]
    assert [m.trial_id for m in resumed.pareto] == [m.trial_id for m in fresh.pareto]
    with pytest.raises(hpo.errors.UserInputError, match="different settings"):
        hpo.optimize(two_bowls, BOWL_SPACE, "bohb", max_trials=60, **{**kwargs, "objectives": ["f1", "size"]})


@pytest.mark.parametrize("objectives, joined", [(["a", "b"], True), (["a", "b", "c"], False)])
def test_the_front_figure_joins_its_members_only_with_two_objectives(objectives, joined):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpo.cli.report_pareto import front_figure
    from hpo.search.multiobjective.objectives import Goals

    def many(config, budget):
        x = config["x"]
        return {"a": x, "b": 1 - x, "c": (x - 0.5) ** 2}
    result = hpo.optimize(many, {"x": {"type": "float", "low": 0.0, "high": 1.0}}, "random", min_budget=1,
                          max_budget=1, max_trials=12, objectives=objectives, seed=0)
    figure = front_figure(result.trials, Goals.build(objectives, None, "minimize"))
    try:
        fronts = [line for ax in figure.axes for line in ax.get_lines() if line.get_label() == "Pareto front"]
        assert fronts and all((line.get_linestyle() != "None") == joined for line in fronts)
    finally:
        plt.close(figure)


@pytest.mark.parametrize("objectives", [["a", "b"], ["a", "b", "c"]])
def test_a_large_front_labels_twenty_members_spread_over_it_the_same_in_every_panel(objectives):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpo.cli.report_pareto import MAX_LABELLED, front_figure
    from hpo.search.multiobjective.objectives import Goals

    def crowded(config, budget):        # most members crowd near a = 0: labels go by position, not rank
        x = config["x"] ** 4
        return {"a": x, "b": 1 - x, "c": (x - 0.5) ** 2}
    result = hpo.optimize(crowded, {"x": {"type": "float", "low": 0.0, "high": 1.0}}, "random", min_budget=1,
                          max_budget=1, max_trials=60, objectives=objectives, seed=0)
    assert len(result.pareto) == 60                           # every trial trades a for b
    goals = Goals.build(objectives, None, "minimize")
    for trials, labels in ((result.trials, MAX_LABELLED), (result.trials[:12], 12)):
        figure = front_figure(trials, goals)
        try:
            panels = [{int(text.get_text()) for text in ax.texts if text.get_text().isdigit()}
                      for ax in figure.axes if ax.lines]
            assert all(ids == panels[0] for ids in panels) and len(panels[0]) == labels
            front = [m for m in result.pareto if m.trial_id in {t.trial_id for t in trials}]
            a = {m.trial_id: m.objectives["a"] for m in front}
            assert {min(a, key=a.get), max(a, key=a.get)} <= panels[0]          # both ends of the front
            if labels == MAX_LABELLED:         # spread over a: the upper half, with a fifth of the members,
                upper = sum(a[i] > 0.5 for i in panels[0])            # gets at least a quarter of the labels
                assert sum(v > 0.5 for v in a.values()) < 0.25 * len(a) and upper >= MAX_LABELLED // 4
            said = figure._suptitle.get_text()
            assert (f"{MAX_LABELLED} of its 60 members labelled" in said) == (labels == MAX_LABELLED)
        finally:
            plt.close(figure)


def test_several_objectives_keep_l_x_uncapped_unless_max_good_is_given():
    from hpo.search.surrogates.model_choice import make_model
    space = SearchSpace.from_dict(SPACE)
    assert make_model(space, "gp", {}, objectives=["a", "b"]).max_good is None
    assert make_model(space, "tpe", {"max_good": 10}, objectives=["a", "b"]).max_good == 10
    assert make_model(space, "gp", {}).max_good == 25
