"""The published benchmark's rbv2_xgboost family: its conditional space, its data-fraction
budget charged in full, and what reaches the surrogate. The surrogate itself lives in the
benchmark venv; a stand-in records the queries."""

import math

import numpy as np
import pytest

import benchmarks.published as pub
import benchmarks.published_problems as pp
from benchmarks.mf_problems import Problem
from benchmarks.searchers import Trace, _suggest
from hpo.space import SearchSpace

TREE_ONLY = ("eta", "gamma", "max_depth", "min_child_weight", "colsample_bytree", "colsample_bylevel")
DART_ONLY = ("rate_drop", "skip_drop")
ALWAYS = ("booster", "alpha", "lambda", "nrounds", "subsample", "num.impute.selected.cpo")


def test_the_booster_gates_eight_of_the_fourteen_parameters_and_nrounds_is_capped_for_every_booster():
    space = pp.RBV2_SPACE
    assert set(space) == set(TREE_ONLY + DART_ONLY + ALWAYS)
    assert all(space[n]["when"] == {"booster": ["gbtree", "dart"]} for n in TREE_ONLY)
    assert all(space[n]["when"] == {"booster": "dart"} for n in DART_ONLY)
    assert all("when" not in space[n] for n in ALWAYS)
    assert space["nrounds"]["high"] == pp.RBV2_NROUNDS_CAP == 1500
    SearchSpace.from_dict(space)          # hpo takes it as declared, conditions included


def test_a_flat_config_reaches_the_surrogate_as_its_active_part():
    flat = {n: 0.5 for n in pp.RBV2_SPACE} | {"booster": "gblinear", "num.impute.selected.cpo": "impute.mean"}
    assert set(pp.active(pp.RBV2_SPACE, flat)) == set(ALWAYS)
    assert set(pp.active(pp.RBV2_SPACE, flat | {"booster": "gbtree"})) == set(ALWAYS + TREE_ONLY)
    assert set(pp.active(pp.RBV2_SPACE, flat | {"booster": "dart"})) == set(ALWAYS + TREE_ONLY + DART_ONLY)


def test_sampled_configs_hold_only_active_parameters_within_the_capped_ranges():
    configs = pp.sample_configs(pp.RBV2_SPACE, 600, seed=3)
    assert {c["booster"] for c in configs} == {"gblinear", "gbtree", "dart"}
    for config in configs:
        assert config == pp.active(pp.RBV2_SPACE, config)
        assert set(ALWAYS) <= set(config)
        assert 7 <= config["nrounds"] <= 1500 and isinstance(config["nrounds"], int)
        assert pp.RBV2_SPACE["alpha"]["low"] <= config["alpha"] <= pp.RBV2_SPACE["alpha"]["high"]
    # An unconditional space samples every parameter, and the same stream as before choices existed.
    lcbench = pp.sample_configs(pp.LCBENCH_SPACE, 5, seed=0)
    assert all(set(c) == set(pp.LCBENCH_SPACE) for c in lcbench)
    rng = np.random.default_rng(0)
    low, high = np.log(16 - 0.4999), np.log(512 + 0.4999)
    first = np.clip(np.round(np.exp(rng.uniform(low, high, 5))), 16, 512).astype(int)
    assert [c["batch_size"] for c in lcbench] == list(first)


def test_the_budget_is_the_fraction_of_the_training_set_at_least_three_percent():
    assert pp.trainsize_of(27) == 1.0
    assert pp.trainsize_of(9) == pytest.approx(1 / 3)
    assert pp.trainsize_of(1) == pytest.approx(1 / 27) and 1 / 27 > 0.03
    assert pp.trainsize_of(0.5) == 0.03


class StandInSurrogate:
    """Records what the benchmark asks YAHPO's surrogate: accuracy falls with nrounds."""

    def __init__(self):
        self.instance, self.queries = None, []

    def set_instance(self, task):
        self.instance = task

    def objective_function(self, configs):
        self.queries.extend((self.instance, dict(c)) for c in configs)
        return [{"acc": 1.0 - c["nrounds"] / 10000 - (1 - c["trainsize"]) / 10} for c in configs]


def test_a_query_names_the_task_the_trainsize_and_ten_replications_and_leaves_inactive_parameters_out(monkeypatch):
    surrogate = StandInSurrogate()
    monkeypatch.setattr(pp, "_yahpo_rbv2", lambda data_path: surrogate)
    published = pp.rbv2_xgboost("1464", data_path="unused")
    config = {n: 0.5 for n in pp.RBV2_SPACE} | {"booster": "gblinear", "nrounds": 100,
                                                 "num.impute.selected.cpo": "impute.hist"}
    assert published.problem.evaluate(config, 9.0) == pytest.approx(100 / 10000 + (2 / 3) / 10)
    assert published.problem.exact(config) == pytest.approx(0.01)
    published.problem.evaluate(pp.active(pp.RBV2_SPACE, config), 9.0)    # the same query: memoised
    assert len(surrogate.queries) == 2
    task, query = surrogate.queries[0]
    assert task == "1464" and query["task_id"] == "1464" and query["repl"] == 10
    assert query["trainsize"] == pytest.approx(1 / 3)
    assert set(query) == set(ALWAYS) | {"task_id", "trainsize", "repl"}
    assert published.from_scratch and published.curve is None and published.tuning
    assert not pp.rbv2_xgboost("16", data_path="unused").tuning


def test_the_tuning_set_is_the_eight_named_tasks_and_the_rest_are_held_out():
    tuning = pp.published_problems("tuning", "unused", families=("rbv2_xgboost",))
    heldout = pp.published_problems("heldout", "unused", families=("rbv2_xgboost",))
    assert sorted(tuning) == sorted(f"rbv2_xgboost_{t}" for t in (15, 29, 50, 182, 470, 1050, 1464, 41164))
    assert len(heldout) == 111 and not set(tuning) & set(heldout)
    assert all(p.family == "rbv2_xgboost" for p in tuning.values())
    assert set(pp.published_problems("tuning", "unused", families=("lcbench",))) == \
        {f"lcbench_{t}" for t in pp.LCBENCH_TUNING}


def counting(value=1.0):
    return Problem("p", {"x": {"type": "float", "low": 0.0, "high": 1.0}}, 0.0,
                   lambda config, budget, run_seed=0: value, lambda config: value)


def test_where_nothing_continues_every_evaluation_is_charged_its_full_budget():
    increments, scratch = Trace(counting(), 0, 100.0), pub.FromScratchTrace(counting(), 0, 100.0)
    for trace in (increments, scratch):
        for budget in (1.0, 3.0, 9.0, 27.0):
            trace.evaluate({"x": 0.5}, budget)
    assert increments.costs[-1] == 27.0
    assert scratch.costs == [1.0, 4.0, 13.0, 40.0]


class RecordingTrial:
    """An Optuna trial's suggest_* methods, answering each parameter's lower bound (or a
    given choice)."""

    def __init__(self, choices):
        self.choices, self.asked = choices, []

    def suggest_float(self, name, low, high, log=False):
        self.asked.append(name)
        return low

    suggest_int = suggest_float

    def suggest_categorical(self, name, values):
        self.asked.append(name)
        return self.choices[name]


@pytest.mark.parametrize("booster, gated", [("gblinear", ()), ("gbtree", TREE_ONLY),
                                            ("dart", TREE_ONLY + DART_ONLY)])
def test_optuna_is_asked_define_by_run_for_the_active_parameters_only(booster, gated):
    problem = pp.rbv2_xgboost("15", data_path="unused").problem
    trial = RecordingTrial({"booster": booster, "num.impute.selected.cpo": "impute.mean"})
    config = _suggest(trial, problem)
    assert set(trial.asked) == set(config) == set(ALWAYS + gated)


def test_a_peers_flat_answer_is_cast_and_cut_to_its_active_part():
    problem = pp.rbv2_xgboost("15", data_path="unused").problem
    handed = {n: np.float64(0.5) for n in pp.RBV2_SPACE} | {"booster": np.str_("gbtree"), "nrounds": np.int64(40),
                                                             "max_depth": np.int64(3),
                                                             "num.impute.selected.cpo": "impute.mean"}
    config = pub.typed_active(problem, handed)
    assert set(config) == set(ALWAYS + TREE_ONLY)
    assert type(config["booster"]) is str and type(config["nrounds"]) is int and type(config["eta"]) is float
    assert not math.isnan(config["eta"])


def test_freeze_thaw_and_priorband_are_not_run_where_no_curve_and_conditions_come_with_the_problem():
    rbv2 = pp.rbv2_xgboost("15", data_path="unused")
    assert not pub.runs_on("hpo freeze_thaw", rbv2) and not pub.runs_on("neps priorband", rbv2)
    assert pub.runs_on("hpo bohb", rbv2) and pub.runs_on("smac3 hyperband+rf", rbv2)
    lcbench = pp.lcbench("126025", data_path="unused")
    assert pub.runs_on("hpo freeze_thaw", lcbench) and pub.runs_on("neps priorband", lcbench)
