"""Known-good starting configs: `enqueue` on every searcher, `search.initial_configs` in YAML,
`hpo.optimize(..., initial_configs=...)`."""

import pytest

import hpo
from hpo.config import experiment_from_dict
from hpo.errors import ConfigError
from hpo.search import make_searcher
from tests.support.searcher_harness import SPACE, drive
from tests.unit.test_searcher_conformance import SEARCHERS, make

KNOWN = [{"x": 2.0, "lr": 0.003, "n": 1, "opt": "adam"},
         {"x": 1.5, "lr": 0.01, "n": 2, "opt": "sgd", "momentum": 0.9}]


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_enqueued_configs_run_first_at_the_schedules_budgets(name):
    searcher = make(name)
    for config in KNOWN:
        searcher.enqueue(config)
    fresh = make(name)
    first = [searcher.ask() for _ in range(2)]
    plain = [fresh.ask() for _ in range(2)]
    assert [job.config for job in first] == KNOWN
    assert [job.budget for job in first] == [job.budget for job in plain]
    log = drive(searcher, 100, workers=2)
    new = [tuple(sorted(j.config.items())) for j in first + [j for j, _ in log] if j.continues is None]
    assert len(new) == len(set(new))                     # never proposed again


def test_enqueue_refuses_a_config_outside_the_space():
    searcher = make("bohb")
    with pytest.raises(ValueError, match="inactive"):
        searcher.enqueue({**KNOWN[0], "momentum": 0.5})            # momentum needs opt sgd/rmsprop
    with pytest.raises(ValueError, match="'n'"):
        searcher.enqueue({**KNOWN[0], "n": 99})
    with pytest.raises(ValueError, match="missing"):
        searcher.enqueue({"x": 1.0})


def test_enqueue_takes_numpy_scalars_as_initial_configs_does():
    import numpy as np
    searcher = make("bohb")
    searcher.enqueue({"x": np.float32(2.0), "lr": np.float64(0.003), "n": np.int64(1), "opt": np.str_("adam")})
    job = searcher.ask()
    assert job.config == KNOWN[0] and all(type(v) in (float, int, str) for v in job.config.values())


def test_make_searcher_enqueues_initial_configs():
    searcher = make_searcher("hyperband", SPACE, seed=0, direction="minimize", min_budget=1, max_budget=27,
                             eta=3, initial_configs=KNOWN)
    assert [searcher.ask().config for _ in range(2)] == KNOWN


def raw_experiment(**search):
    return {"name": "t", "data": {"dataset": "digits"}, "space": SPACE,
            "search": {"algorithm": "bohb", "objective": "objective", **search}}


def test_yaml_initial_configs_are_parsed_and_checked():
    experiment = experiment_from_dict(raw_experiment(initial_configs=KNOWN), source="t.yaml")
    assert list(experiment.search.initial_configs) == KNOWN
    with pytest.raises(ConfigError, match=r"search\.initial_configs\[1\].*'n'"):
        experiment_from_dict(raw_experiment(initial_configs=[KNOWN[0], {**KNOWN[1], "n": 0}]), source="t.yaml")
    with pytest.raises(ConfigError, match=r"search\.initial_configs"):
        experiment_from_dict(raw_experiment(initial_configs={"x": 1.0}), source="t.yaml")


def test_optimize_runs_initial_configs_first():
    seen = []

    def objective(config, budget):
        seen.append(dict(config))
        return config["x"] ** 2 + 1.0 / budget

    space = {"x": {"type": "float", "low": -5.0, "high": 5.0}}
    result = hpo.optimize(objective, space, searcher="bohb", min_budget=1, max_budget=9, max_trials=12,
                          initial_configs=[{"x": 0.25}, {"x": -0.5}])
    assert seen[:2] == [{"x": 0.25}, {"x": -0.5}]
    assert result.trials[0].config == {"x": 0.25}
