"""One objective with constraints: a trial that breaks a constraint ranks after every feasible
one, infeasible ones by total violation (Deb's constraint domination), in every reader of a
study (`hpo.study.ranking`): `hpo best` (text and `--json`), `hpo status --top`, `hpo
report`'s table and `hpo.optimize`'s result (the runner's best, which `hpo search` closes
with). A study without constraints ranks as it always has."""

import json
import re

import pytest

import hpo
from hpo.search.multiobjective.objectives import Goals
from hpo.study import Study
from hpo.study.ranking import best_in, feasible_value, top_configurations
from hpo.trial import TrialState
from tests.support.cli import hpo_here

SPACE = {"x": {"type": "float", "low": 0, "high": 1}}
BOUND = 500


def smaller_is_bigger(config, budget):
    """The smaller x, the better the objective and the larger the model: the best values break
    `params <= BOUND`."""
    return {"objective": config["x"], "params": 1000 * (1 - config["x"])}


def listed_ids(output: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^(\d+)\s+complete", output, re.MULTILINE)]


def complete(trials):
    return [t for t in trials if t.state == TrialState.COMPLETE]


@pytest.fixture(scope="module")
def constrained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("constrained") / "study"
    result = hpo.optimize(smaller_is_bigger, SPACE, "random", min_budget=1, max_budget=1, max_trials=10,
                          constraints=[f"params <= {BOUND}"], study_dir=folder, seed=0)
    trials = complete(result.trials)
    # The study has both kinds, and its best value is an infeasible trial's.
    assert {t.metrics["params"] <= BOUND for t in trials} == {True, False}
    assert min(trials, key=lambda t: t.value).metrics["params"] > BOUND
    return folder, result


def test_hpo_best_names_the_best_feasible_trial_as_optimize_does(constrained, capsys):
    folder, result = constrained
    feasible = [t for t in complete(result.trials) if t.metrics["params"] <= BOUND]
    expected = min(feasible, key=lambda t: t.value)
    assert result.best_config == expected.config and result.best_value == expected.value
    done = hpo_here(capsys, "best", folder)
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == f"trial {expected.trial_id}: objective={expected.value:.4f} at budget 1"
    record = json.loads(hpo_here(capsys, "best", folder, "--json").stdout)
    assert record["trial_id"] == expected.trial_id and record["config"] == expected.config
    assert record["feasible"] is True and record["constraints"] == [f"params <= {BOUND}"]


def test_status_top_ranks_feasible_trials_first_then_infeasible_ones_by_violation(constrained, capsys):
    folder, result = constrained
    trials = complete(result.trials)
    feasible = sorted((t for t in trials if t.metrics["params"] <= BOUND), key=lambda t: t.value)
    infeasible = sorted((t for t in trials if t.metrics["params"] > BOUND), key=lambda t: t.metrics["params"])
    expected = [t.trial_id for t in feasible + infeasible]
    done = hpo_here(capsys, "status", folder, "--top", len(trials))
    assert done.returncode == 0
    assert listed_ids(done.stdout) == expected
    assert listed_ids(hpo_here(capsys, "status", folder, "--top", 1).stdout) == expected[:1]


def test_the_reports_top_configurations_rank_as_hpo_best(constrained, capsys):
    folder, result = constrained
    assert hpo_here(capsys, "report", folder).returncode == 0
    page = (folder / "report" / "report.html").read_text()
    table = page[page.index("<h2>Top configurations</h2>"):]
    assert "feasible first, then budget" in table
    shown = [int(i) for i in re.findall(r"<tr><td>(\d+)</td>", table)]
    study = Study.open(folder, read_only=True)
    try:
        goals = Goals.build(constraints=[f"params <= {BOUND}"])
        assert shown == [t.trial_id for t in top_configurations(study.trials(), goals, 10)]
    finally:
        study.close()
    assert shown[0] == json.loads(hpo_here(capsys, "best", folder, "--json").stdout)["trial_id"]


def test_no_feasible_trial_best_is_the_least_violating_and_says_it_is_infeasible(tmp_path, capsys):
    folder = tmp_path / "study"
    result = hpo.optimize(smaller_is_bigger, SPACE, "random", min_budget=1, max_budget=1, max_trials=6,
                          constraints=["params <= 0"], study_dir=folder, seed=0)
    least = min(complete(result.trials), key=lambda t: t.metrics["params"])
    assert result.best_config == least.config
    done = hpo_here(capsys, "best", folder)
    assert done.stdout.splitlines()[0] == (f"trial {least.trial_id}: objective={least.value:.4f} at budget 1 "
                                           f"(infeasible under params <= 0)")
    record = json.loads(hpo_here(capsys, "best", folder, "--json").stdout)
    assert record["trial_id"] == least.trial_id and record["feasible"] is False
    # The best so far that TensorBoard's search run and the report plot counts feasible
    # trials alone: here there is none to plot.
    goals = Goals.build(None, ["params <= 0"], "minimize")
    assert feasible_value(least, goals) is None and feasible_value(None, goals) is None
    assert feasible_value(least, Goals.build(None, ["params <= 1e9"], "minimize")) == least.value


def budget_is_cost(config, budget):
    """Better with budget, and breaking `cost <= 3` at the largest budget, 9."""
    return {"objective": config["x"] + 1 / budget, "cost": budget}


def test_a_feasible_trial_at_a_lower_budget_ranks_before_any_infeasible_one_at_the_largest(tmp_path, capsys):
    folder = tmp_path / "study"
    result = hpo.optimize(budget_is_cost, SPACE, "hyperband", min_budget=1, max_budget=9, max_trials=20,
                          constraints=["cost <= 3"], study_dir=folder, seed=0)
    trials = complete(result.trials)
    assert any(t.budget == 9 for t in trials)
    expected = min((t for t in trials if t.budget == 3), key=lambda t: t.value)
    assert (result.best_config, result.best_budget) == (expected.config, 3)
    record = json.loads(hpo_here(capsys, "best", folder, "--json").stdout)
    assert (record["trial_id"], record["feasible"]) == (expected.trial_id, True)
    # Each configuration once, at its deepest feasible rung: the first is `hpo best`'s.
    top = listed_ids(hpo_here(capsys, "status", folder, "--top", 5).stdout)
    by_id = {t.trial_id: t for t in trials}
    assert top[0] == expected.trial_id and all(by_id[i].budget <= 3 for i in top)
    assert len({by_id[i].lineage for i in top}) == len(top)


def test_a_resumed_constrained_search_keeps_its_best_feasible(tmp_path, capsys):
    kwargs = dict(min_budget=1, max_budget=9, constraints=["cost <= 3"], study_dir=tmp_path / "study", seed=0)
    hpo.optimize(budget_is_cost, SPACE, "hyperband", max_trials=12, **kwargs)
    resumed = hpo.optimize(budget_is_cost, SPACE, "hyperband", max_trials=24, **kwargs)
    expected = min((t for t in complete(resumed.trials) if t.budget <= 3), key=lambda t: (-t.budget, t.value))
    assert resumed.best_config == expected.config
    assert json.loads(hpo_here(capsys, "best", tmp_path / "study", "--json").stdout)["trial_id"] == expected.trial_id


def test_a_study_without_constraints_ranks_by_budget_then_objective_as_before(tmp_path, capsys):
    folder = tmp_path / "study"
    result = hpo.optimize(budget_is_cost, SPACE, "hyperband", min_budget=1, max_budget=9, max_trials=20,
                          study_dir=folder, seed=0)
    trials = complete(result.trials)
    expected = min(trials, key=lambda t: (-t.budget, t.value, t.trial_id))
    study = Study.open(folder, read_only=True)
    try:
        assert study.best("minimize").trial_id == expected.trial_id
        assert best_in(study, Goals.build()).trial_id == expected.trial_id
    finally:
        study.close()
    assert result.best_config == expected.config and result.best_budget == 9
    record = json.loads(hpo_here(capsys, "best", folder, "--json").stdout)
    assert record["trial_id"] == expected.trial_id and "feasible" not in record and "constraints" not in record
    deepest = {}
    for t in trials:
        if t.lineage not in deepest or t.budget > deepest[t.lineage].budget:
            deepest[t.lineage] = t
    ranked = sorted(deepest.values(), key=lambda t: (-t.budget, t.value, t.trial_id))
    top = listed_ids(hpo_here(capsys, "status", folder, "--top", 5).stdout)
    assert top == [t.trial_id for t in ranked[:5]]
