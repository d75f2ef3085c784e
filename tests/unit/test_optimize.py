"""`hpo.optimize`: any Python objective, the same study machinery as the CLI."""

import subprocess
import sys
import threading
import time

import pytest

import hpo
import hpo.errors
from hpo.errors import ConfigError
from hpo.space import SearchSpace

SPACE = {"x": {"type": "float", "low": -5.0, "high": 10.0},
         "kind": {"type": "choice", "values": ["a", "b"]},
         "y": {"type": "float", "low": -1.0, "high": 1.0, "when": {"kind": "b"}}}


def bowl(config, budget):
    """Minimum 0 at x=2, kind=b, y=0; low budgets see a noisy, biased version."""
    penalty = 0.0 if config["kind"] == "b" else 1.0
    return (config["x"] - 2) ** 2 + penalty + config.get("y", 0.5) ** 2 + 1.0 / budget


@pytest.mark.parametrize("searcher", ["random", "hyperband", "asha", "async_hyperband",
                                      *(pytest.param(s, marks=pytest.mark.slow) for s in ("bohb", "async_bohb"))])
def test_every_searcher_minimises_a_plain_function(searcher):
    result = hpo.optimize(bowl, SPACE, searcher, min_budget=1, max_budget=9, max_trials=150, seed=1)
    assert result.stopped_because in ("max_trials", "searcher finished")
    assert len(result.trials) == 150 or result.stopped_because == "searcher finished"
    assert result.best_budget == 9
    assert result.best_value == pytest.approx(bowl(result.best_config, 9))
    assert result.best_value < 2.5      # random's worst corner is ~64; 1/9 is the floor
    if searcher in ("bohb", "async_bohb"):
        # The model finds the right branch (kind b) and x near 2 in most seeds; about one in
        # seven settles in branch a (1.36), so the claim is three seeds in four.
        bests = [result.best_value] + [hpo.optimize(bowl, SPACE, searcher, min_budget=1, max_budget=9,
                                                    max_trials=150, seed=seed).best_value for seed in range(2, 9)]
        assert sum(best < 0.5 for best in bests) >= 6, bests


def test_to_rows_are_flat_and_complete():
    result = hpo.optimize(bowl, SPACE, "hyperband", min_budget=1, max_budget=9, max_trials=20)
    rows = result.to_rows()
    assert len(rows) == 20
    assert {"trial_id", "state", "budget", "value", "config.x", "config.kind", "metric.objective"} <= set(rows[0])
    assert all(not isinstance(v, (dict, list)) for row in rows for v in row.values())


def test_dict_results_maximised_on_a_named_metric():
    def score(config, budget):
        return {"accuracy": 1 - abs(config["x"] - 2) / 20, "seconds": 0.0}
    result = hpo.optimize(score, SPACE, "random", min_budget=1, max_budget=1, max_trials=30,
                          direction="maximize", metric="accuracy")
    assert result.best_value == max(t.value for t in result.trials)
    assert set(result.trials[0].metrics) == {"accuracy", "seconds"}


def test_failing_trials_are_recorded_and_the_search_goes_on():
    def flaky(config, budget):
        if config["x"] < 0:
            raise ValueError("negative x is not allowed")
        return float("nan") if config["x"] > 8 else config["x"]
    result = hpo.optimize(flaky, SPACE, "random", min_budget=1, max_budget=1, max_trials=40, seed=3)
    states = {t.state.value for t in result.trials}
    assert states == {"complete", "failed"}
    errors = [t.error for t in result.trials if t.state.value == "failed"]
    assert any("ValueError: negative x is not allowed" in e for e in errors)
    assert any("the objective 'objective' was nan" in e for e in errors)   # NaN is not a result
    assert 0 <= result.best_value <= 8


def test_a_study_dir_persists_and_a_second_call_resumes(tmp_path):
    study = tmp_path / "study"
    calls = []

    def counted(config, budget):
        calls.append((config["x"], budget))
        return bowl(config, budget)
    first = hpo.optimize(counted, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=20, study_dir=study)
    n_first = len(calls)
    second = hpo.optimize(counted, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=40, study_dir=study)
    assert len(calls) - n_first == 20, "the resumed call re-ran finished trials"
    straight = hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=40)
    assert [(t.config, t.budget) for t in second.trials] == [(t.config, t.budget) for t in straight.trials]
    assert second.trials[:20] == first.trials and second.study_dir == study
    cli = subprocess.run([sys.executable, "-m", "hpo", "best", str(study), "--json"], capture_output=True, text=True)
    assert cli.returncode == 0 and str(second.best_value)[:8] in cli.stdout


def test_workers_run_the_objective_concurrently():
    active, peak, lock = [0], [0], threading.Lock()

    def slow(config, budget):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return config["x"] ** 2
    result = hpo.optimize(slow, SPACE, "asha", min_budget=1, max_budget=9, max_trials=30, workers=3)
    assert len(result.trials) == 30 and all(t.state.value == "complete" for t in result.trials)
    assert peak[0] == 3


def test_trials_that_finish_together_past_the_time_limit_are_all_recorded():
    # Three simulated workers whose trials all end at t=10, past the limit of 5: the first read
    # is recorded, and so are the two whose results are in hand at the same moment, rather
    # than interrupted and thrown away (the simulated clock makes the moment exact).
    def ten_seconds(config, budget):
        return {"objective": config["x"], "cost": 10.0}
    result = hpo.optimize(ten_seconds, SPACE, "random", min_budget=1, max_budget=1, max_trials=20, time_limit=5,
                          workers=3, simulate=hpo.Simulation(cost="cost"))
    assert result.stopped_because == "time_limit"
    assert [t.state.value for t in result.trials] == ["complete"] * 3
    assert result.simulation.simulated_seconds == 10.0


def test_an_objective_that_breaks_midway_stops_the_search_and_the_result_keeps_what_ran(monkeypatch):
    import hpo.driver.runner

    calls, shown = [], []
    progress = hpo.driver.runner.Progress
    monkeypatch.setattr(hpo.driver.runner, "Progress", lambda **kw: shown.append(kw["finished"]) or progress(**kw))

    def breaks_after_five(config, budget):
        calls.append(config)
        if len(calls) > 5:
            raise RuntimeError("license server down")
        return config["x"] ** 2
    result = hpo.optimize(breaks_after_five, SPACE, "random", min_budget=1, max_budget=1, max_trials=40,
                          max_consecutive_failures=3)
    assert result.stopped_because == "max_consecutive_failures" and len(calls) == 8
    states = [t.state.value for t in result.trials]
    assert states == ["complete"] * 5 + ["failed"] * 3
    assert result.best_value == min(c["x"] ** 2 for c in calls[:5])
    assert "license server down" in result.trials[-1].error
    assert shown[-1] == 8           # the progress shown counts the failure that stopped the search


def test_a_search_space_object_and_a_time_limit():
    space = SearchSpace.from_dict({"x": {"type": "int", "low": 0, "high": 100_000}})   # not run through in 1 s
    result = hpo.optimize(lambda c, b: (c["x"] - 42) ** 2, space, "random", min_budget=1, max_budget=1,
                          time_limit=1.0)
    assert result.stopped_because == "time_limit" and result.best_value is not None
    assert len(result.trials) > 50


def test_numpy_values_in_the_space_and_initial_configs_search_and_store_as_python_numbers(tmp_path):
    import json

    import numpy as np

    from hpo.study import DB_NAME, Study
    space = {"n": {"type": "choice", "values": list(np.arange(1, 4))},
             "x": {"type": "float", "low": np.float32(0.125), "high": np.float64(1.0)},
             "k": {"type": "int", "low": np.int64(1), "high": np.int32(5)}}
    seen = []

    def objective(config, budget):
        seen.append(config)
        return config["n"] + config["x"] + config["k"]
    result = hpo.optimize(objective, space, "random", min_budget=1, max_budget=1, max_trials=4, seed=0,
                          initial_configs=[{"n": np.int64(2), "x": np.float64(0.5), "k": np.int64(3)}],
                          study_dir=tmp_path / "s")
    assert seen[0] == {"n": 2, "x": 0.5, "k": 3} and len(seen) == 4
    assert all(type(c["n"]) is int and type(c["x"]) is float and type(c["k"]) is int for c in seen)
    study = Study.open(tmp_path / "s", read_only=True)
    try:
        assert study.experiment()["space"]["n"]["values"] == [1, 2, 3]
        json.dumps(study.experiment())
    finally:
        study.close()
    assert (tmp_path / "s" / DB_NAME).exists()
    assert result.best_value == min(c["n"] + c["x"] + c["k"] for c in seen)


def test_a_bad_space_names_the_key():
    with pytest.raises(ConfigError, match=r"key 'space.x.low'.*low > 0"):
        hpo.optimize(bowl, {"x": {"type": "float", "low": 0, "high": 1, "log": True}}, min_budget=1, max_budget=3)


def test_importing_hpo_and_optimizing_never_loads_tensorflow():
    code = ("import sys, hpo; hpo.optimize(lambda c, b: c['x'], {'x': {'type': 'float', 'low': 0, 'high': 1}},"
            " min_budget=1, max_budget=9, max_trials=30); print('tensorflow' in sys.modules, 'keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_a_wrong_searcher_names_the_argument_not_the_yaml_key():
    with pytest.raises(ConfigError) as caught:
        hpo.optimize(bowl, SPACE, searcher="bohbb", min_budget=1, max_budget=3)
    assert "argument 'searcher'" in str(caught.value) and "did you mean 'bohb'" in str(caught.value)
    assert "search.algorithm" not in str(caught.value)


@pytest.mark.parametrize("budgets, argument, message", [
    ({"min_budget": 1, "max_budget": 0}, "max_budget", "expected max_budget > 0, got 0"),
    ({"min_budget": 1, "max_budget": 9, "eta": 1}, "eta", "expected eta >= 2"),
    ({"min_budget": 9, "max_budget": 3}, "min_budget", "expected min_budget <= max_budget"),
    ({"min_budget": 1, "max_budget": 9, "max_trials": 0}, "max_trials", "expected max_trials >= 1"),
])
def test_a_schedule_that_cannot_run_is_refused_naming_the_argument_before_any_study(tmp_path, budgets, argument,
                                                                                     message):
    with pytest.raises(ConfigError) as caught:
        hpo.optimize(bowl, SPACE, "hyperband", study_dir=tmp_path / "study", **budgets)
    assert f"hpo.optimize(), argument {argument!r}: {message}" in str(caught.value)
    assert "search." not in str(caught.value)
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize("arguments, kind, message", [
    ({"simulate": True}, TypeError, "argument 'simulate': expected an hpo.Simulation (for example "
                                    "hpo.Simulation(cost='cost')) or None, got bool True"),
    ({"workers": "auto"}, TypeError, "argument 'workers': expected a whole number >= 1 (the threads calling the "
                                     "objective), got 'auto'"),
    ({"workers": "auto", "simulate": hpo.Simulation()}, TypeError,
     "argument 'workers': expected a whole number >= 1 (the simulated workers), got 'auto'"),
    ({"workers": 0}, ValueError, "argument 'workers': expected a whole number >= 1 (the threads calling the "
                                 "objective), got 0"),
])
def test_workers_and_simulate_of_the_wrong_kind_are_refused_naming_the_argument(tmp_path, arguments, kind, message):
    with pytest.raises(kind) as caught:
        hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=2, study_dir=tmp_path / "study",
                     **arguments)
    assert isinstance(caught.value, ConfigError)
    assert f"hpo.optimize(), {message}" in str(caught.value)
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize("arguments, kind, message", [
    ({"options": ["a"]}, TypeError, "argument 'options': expected a dict of the searcher's keyword arguments, "
                                    "got list ['a']"),
    ({"initial_configs": {"x": 1.0, "kind": "a"}}, TypeError, "argument 'initial_configs': expected a list of "
                                                              "configs, each a dict of the space's parameters"),
    ({"initial_configs": [{"x": 100.0, "kind": "a"}]}, ValueError, "argument 'initial_configs': not a config"),
    ({"study_dir": 5}, TypeError, "argument 'study_dir': expected a folder path (str or pathlib.Path), got int 5"),
    ({"direction": "max"}, ValueError, "argument 'direction': objective 'objective': direction must be"),
    ({"metric": 3}, TypeError, "argument 'metric': an objective's name must be a non-empty string, got 3"),
    ({"total_budget": 5}, ValueError, "argument 'total_budget': expected at least the largest budget (9)"),
    ({"objective": 5}, TypeError, "argument 'objective': expected a function objective(config, budget), got int 5"),
    ({"fresh": "yes"}, TypeError, "argument 'fresh': expected True or False, got str 'yes'"),
    ({"fresh": True}, ValueError, "argument 'fresh': fresh=True moves a study in study_dir aside, and no "
                                  "study_dir was given"),
])
def test_arguments_of_the_wrong_kind_are_refused_naming_the_argument(tmp_path, monkeypatch, arguments, kind,
                                                                      message):
    monkeypatch.chdir(tmp_path)
    arguments = {"objective": bowl, **arguments}
    with pytest.raises(kind) as caught:
        hpo.optimize(space=SPACE, searcher="bohb", min_budget=1, max_budget=9, max_trials=2, **arguments)
    assert isinstance(caught.value, ConfigError)
    assert f"hpo.optimize(), {message}" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_simulation_whose_objective_returns_no_cost_leaves_its_trial_interrupted_and_its_error_in_hpo_log(
        tmp_path):
    from hpo.study import Study
    study = tmp_path / "study"
    with pytest.raises(hpo.errors.UserInputError, match="with no 'cost'"):
        hpo.optimize(lambda config, budget: {"objective": config["x"]}, SPACE, "random", min_budget=1, max_budget=1,
                     max_trials=4, workers=2, simulate=hpo.Simulation(), study_dir=study)
    opened = Study.open(study, read_only=True)
    try:
        assert [(t.trial_id, t.state.value) for t in opened.trials()] == [(0, "interrupted")]
    finally:
        opened.close()
    log_text = (study / "hpo.log").read_text()
    assert "ERROR hpo: the search stopped: UserInputError: a simulated search needs" in log_text
    assert "Traceback (most recent call last)" in log_text


@pytest.mark.parametrize("where", ["a file", "."])
def test_a_study_dir_that_cannot_hold_a_study_names_the_argument_not_the_cli(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a file").write_text("not a folder")
    with pytest.raises(ConfigError) as caught:
        hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=2, study_dir=where)
    message = str(caught.value)
    assert message.startswith("hpo.optimize(), argument 'study_dir': ")
    assert not any(word in message for word in ("--study-dir", "output.dir", "--fresh")), message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file"]


def test_a_changed_space_under_study_dir_says_to_pass_fresh_and_fresh_starts_anew(tmp_path, monkeypatch):
    import hpo.study.resume
    said = []
    monkeypatch.setattr(hpo.study.resume.log, "warning", lambda message, *args: said.append(message % args))
    study = tmp_path / "study"
    hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=3, study_dir=study)
    changed = {**SPACE, "x": {"type": "float", "low": -1.0, "high": 1.0}}
    with pytest.raises(hpo.errors.UserInputError) as caught:
        hpo.optimize(bowl, changed, "random", min_budget=1, max_budget=1, max_trials=3, study_dir=study)
    assert "fresh=True" in str(caught.value) and "--fresh" not in str(caught.value)
    result = hpo.optimize(bowl, changed, "random", min_budget=1, max_budget=1, max_trials=3, study_dir=study,
                          fresh=True)
    assert len(result.trials) == 3 and all(-1 <= t.config["x"] <= 1 for t in result.trials)
    assert len(list(tmp_path.glob("study.old-*"))) == 1               # the old study is kept beside it
    assert said == [f"started afresh: the previous study was moved to {next(tmp_path.glob('study.old-*'))}"]


def logged(monkeypatch, *levels: str) -> list[str]:
    """The lines the runner and `hpo.optimize` log at `levels` from here on."""
    import hpo.driver.runner
    import hpo.objective.optimization
    said = []
    for module in (hpo.driver.runner, hpo.objective.optimization):
        for level in levels:
            monkeypatch.setattr(module.log, level, lambda message, *args: said.append(message % args))
    return said


def bohb_study_of_eight(tmp_path):
    study = tmp_path / "study"
    hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=8, study_dir=study)
    return study


@pytest.mark.parametrize("persisted", [True, False])
def test_ctrl_c_stops_the_caller_once_the_study_is_safe_and_the_same_call_resumes(tmp_path, monkeypatch, persisted):
    import signal

    said = logged(monkeypatch, "warning")
    calls = []

    def objective(config, budget):
        calls.append(config)
        if len(calls) == 3:
            signal.raise_signal(signal.SIGINT)      # Ctrl-C while the third trial runs
        return bowl(config, budget)
    study = tmp_path / "study" if persisted else None
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)    # a script's own handler
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            hpo.optimize(objective, SPACE, "random", min_budget=1, max_budget=1, max_trials=6, study_dir=study)
    finally:
        signal.signal(signal.SIGINT, previous)
    # What ran rides on the exception: with no study, the two finished trials are all there is.
    ran = stopped.value.result
    assert [t.state.value for t in ran.trials] == ["complete", "complete", "interrupted"]
    first_two = min(ran.trials[:2], key=lambda t: t.value)
    assert (ran.best_value, ran.best_config) == (first_two.value, first_two.config)
    interrupted = [line for line in said if "interrupted" in line]
    if not persisted:        # a scratch study is gone: nothing will rerun, and the warning says what is lost
        assert interrupted == ["trial 2 interrupted: interrupted by the user (Ctrl-C)",
                               f"search interrupted after 2 finished trials, kept in no study (no study_dir); the "
                               f"best so far: {ran.best_value:.6g} at budget 1, {ran.best_config}; the exception's "
                               f".result holds them, and study_dir= keeps a search to resume"], said
        return
    assert interrupted == ["trial 2 interrupted: interrupted by the user (Ctrl-C); it will rerun on resume",
                           f"search interrupted: the study in {study} is saved; the same call resumes it"], said
    result = hpo.optimize(objective, SPACE, "random", min_budget=1, max_budget=1, max_trials=6, study_dir=study)
    assert [t.state.value for t in result.trials] == ["complete"] * 6
    straight = hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=6)
    assert [t.config for t in result.trials] == [t.config for t in straight.trials]


def test_ctrl_c_while_a_resume_replays_the_study_stops_it_saying_so_and_a_rerun_resumes(tmp_path, monkeypatch):
    """The replay of thousands of results takes seconds; Ctrl-C then is no crash."""
    import hpo.driver.runner
    study = bohb_study_of_eight(tmp_path)
    said = logged(monkeypatch, "warning", "info")
    replay = hpo.driver.runner.replay

    def interrupted_replay(study, searcher, on_tell=None):
        replay(study, searcher, on_tell)
        raise KeyboardInterrupt
    monkeypatch.setattr(hpo.driver.runner, "replay", interrupted_replay)
    with pytest.raises(KeyboardInterrupt):
        hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=12, study_dir=study)
    assert "resuming: telling bohb the study's 8 finished trial(s) again" in said
    assert said[-1] == f"search interrupted: the study in {study} is saved; the same call resumes it"
    monkeypatch.setattr(hpo.driver.runner, "replay", replay)
    resumed = hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=12, study_dir=study)
    straight = hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=12)
    assert [t.config for t in resumed.trials] == [t.config for t in straight.trials]


def test_a_long_replay_says_how_far_it_got(tmp_path, monkeypatch):
    import hpo.driver.runner
    study = bohb_study_of_eight(tmp_path)
    said = logged(monkeypatch, "info")
    monkeypatch.setattr(hpo.driver.runner, "REPLAY_PROGRESS_SECONDS", 0.0)     # every result counts as slow
    hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=9, study_dir=study)
    progress = [line.split(" told again")[0] for line in said if " told again (" in line]
    assert progress == [f"resuming: {n} of 8" for n in range(1, 8)], said      # the last one is the end
    assert said[said.index(next(line for line in said if "7 of 8" in line)) + 1].startswith("replayed the study in")


def test_a_renamed_objective_resumes_its_study_and_a_reordered_space_is_refused_before_the_search(tmp_path):
    study = tmp_path / "study"
    hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=6, study_dir=study)

    def renamed(config, budget):
        return bowl(config, budget)
    result = hpo.optimize(renamed, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=8, study_dir=study)
    assert len(result.trials) == 8
    reordered = {"kind": SPACE["kind"], "y": SPACE["y"], "x": SPACE["x"]}
    with pytest.raises(hpo.errors.UserInputError) as caught:
        hpo.optimize(bowl, reordered, "bohb", min_budget=1, max_budget=9, max_trials=10, study_dir=study)
    assert "the order of the space's parameters: ['x', 'kind', 'y'] -> ['kind', 'x', 'y']" in str(caught.value)
    assert "fresh=True" in str(caught.value)
    assert len(hpo.optimize(bowl, SPACE, "bohb", min_budget=1, max_budget=9, max_trials=10,
                            study_dir=study).trials) == 10


def test_an_objective_that_raises_keeps_its_traceback_in_the_trial_error_and_hpo_log(tmp_path):
    def deep_failure(config, budget):
        return {}["missing key"]

    def objective(config, budget):
        return deep_failure(config, budget)
    study = tmp_path / "study"
    result = hpo.optimize(objective, SPACE, "random", min_budget=1, max_budget=1, max_trials=2, study_dir=study)
    error = result.trials[0].error
    assert error.splitlines()[0] == "KeyError: 'missing key'"
    assert "Traceback (most recent call last)" in error and "in deep_failure" in error
    log = (study / "hpo.log").read_text()
    assert "trial 0 failed: KeyError: 'missing key'" in log and "in deep_failure" in log


def test_an_objective_returning_text_fails_its_trial_instead_of_counting_as_a_number():
    """float("0.5") is 0.5: without a check, a string result would be ranked as a value."""
    result = hpo.optimize(lambda c, b: "0.5", {"x": {"type": "float", "low": 0.0, "high": 1.0}}, "random",
                          min_budget=1, max_budget=1, max_trials=2)
    assert [t.state.value for t in result.trials] == ["failed", "failed"]
    assert "returned str '0.5' for 'objective'; expected a number" in result.trials[0].error
    nested = hpo.optimize(lambda c, b: {"objective": 1.0, "note": True}, {"x": {"type": "float", "low": 0.0,
                                                                                 "high": 1.0}},
                          "random", min_budget=1, max_budget=1, max_trials=1)
    assert "returned bool True for 'note'" in nested.trials[0].error


def test_a_library_study_records_no_dataset_and_resumes_one_stored_with_the_old_placeholder(tmp_path):
    """`hpo.optimize` searches a Python function: its experiment has no data section, and a
    study that stored the placeholder loader hpo once wrote there still resumes."""
    import json
    import sqlite3

    from hpo.study import Study

    space = {"x": {"type": "float", "low": 0.0, "high": 1.0}}
    hpo.optimize(lambda c, b: c["x"], space, "random", min_budget=1, max_budget=1, max_trials=2,
                 study_dir=tmp_path / "s")
    study = Study.open(tmp_path / "s", read_only=True)
    stored = study.experiment()
    study.close()
    assert stored["data"] is None
    stored["data"] = {"dataset": "hpo.objective.optimization:no_dataset", "validation_split": 0.1, "test_split": 0.1,
                      "limit": None, "options": {}}
    with sqlite3.connect(tmp_path / "s" / "study.sqlite") as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'experiment'", (json.dumps(stored, sort_keys=True),))
    resumed = hpo.optimize(lambda c, b: c["x"], space, "random", min_budget=1, max_budget=1, max_trials=4,
                           study_dir=tmp_path / "s")
    assert len(resumed.trials) == 4


def test_exporting_a_model_from_a_library_study_is_refused_with_what_to_do(tmp_path, capsys):
    from hpo.cli import main

    hpo.optimize(lambda c, b: c["x"], {"x": {"type": "float", "low": 0.0, "high": 1.0}}, "random",
                 min_budget=1, max_budget=1, max_trials=1, study_dir=tmp_path / "s")
    code = main(["best", str(tmp_path / "s"), "--export", str(tmp_path / "m.keras")])
    assert code == 2
    err = capsys.readouterr().err
    assert "called a Python function (hpo.optimize), so there is no Keras model to export" in err
    assert not (tmp_path / "m.keras").exists()


def test_hpo_tensorboard_on_a_study_of_optimize_says_it_has_no_logs(tmp_path, capsys):
    from tests.support.cli import hpo_here
    hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=2, study_dir=tmp_path / "s")
    before = sorted(p.name for p in (tmp_path / "s").iterdir())
    done = hpo_here(capsys, "tensorboard", tmp_path / "s")
    assert done.returncode == 2 and "this study has no TensorBoard logs" in done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == before


def test_random_search_runs_each_config_of_a_finite_space_once_then_finishes(tmp_path):
    """As Keras Tuner's random search: 2 x 3 configs, asked for 10, run 6 distinct and stop;
    a rerun of the study resumes by replay and has nothing left."""
    space = {"kind": {"type": "choice", "values": ["a", "b"]}, "n": {"type": "int", "low": 1, "high": 3}}
    result = hpo.optimize(lambda config, budget: config["n"], space, "random", min_budget=1, max_budget=1,
                          max_trials=10, study_dir=tmp_path / "study")
    configs = [(t.config["kind"], t.config["n"]) for t in result.trials]
    assert sorted(configs) == [(k, n) for k in "ab" for n in (1, 2, 3)]
    assert result.stopped_because == "searcher finished"
    again = hpo.optimize(lambda config, budget: config["n"], space, "random", min_budget=1, max_budget=1,
                         max_trials=10, study_dir=tmp_path / "study")
    assert len(again.trials) == 6 and again.stopped_because == "searcher finished"


@pytest.mark.parametrize("goals, argument", [({"objectives": ["error", "params"]}, "objectives"),
                                             ({"constraints": ["params <= 3"]}, "constraints")])
def test_a_searcher_refusing_the_goals_names_the_goal_argument_not_options(tmp_path, goals, argument):
    with pytest.raises(ConfigError, match=rf"hpo.optimize\(\), argument '{argument}': FreezeThaw"):
        hpo.optimize(lambda config, budget: {"error": 1.0, "params": 2.0}, SPACE, "freeze_thaw", min_budget=1,
                     max_budget=9, study_dir=tmp_path / "study", **goals)
    assert not (tmp_path / "study").exists()


def test_a_direction_beside_objectives_is_refused_even_the_default_one(tmp_path):
    """direction='minimize' beside objectives=['accuracy'] was silently ignored (accuracy then
    maximised): the argument is refused whatever its value, as API.md says."""
    with pytest.raises(ConfigError, match=r"argument 'direction': with objectives, give each its direction"):
        hpo.optimize(lambda config, budget: {"accuracy": 0.5}, SPACE, "random", min_budget=1, max_budget=1,
                     objectives=["accuracy"], direction="minimize", study_dir=tmp_path / "study")
    assert not (tmp_path / "study").exists()


def test_ctrl_c_while_the_workers_shut_down_after_the_last_trial_keeps_the_search_as_it_ended(monkeypatch):
    from hpo.executors.function import FunctionExecutor

    said = logged(monkeypatch, "warning")
    close = FunctionExecutor.close

    def interrupted_close(self):
        close(self)
        raise KeyboardInterrupt      # as a Ctrl-C lands while a cluster shuts down
    monkeypatch.setattr(FunctionExecutor, "close", interrupted_close)
    result = hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=3, workers=2)
    assert result.stopped_because == "max_trials" and len(result.trials) == 3
    assert "interrupted while the workers shut down; the search had already stopped (max_trials)" in said


def test_a_call_on_a_study_that_already_ran_its_search_says_so_and_how_to_extend_it(tmp_path, monkeypatch):
    """As `hpo search` says it: nothing ran, the result is the stored trials, and the argument
    that extends the search."""
    study = tmp_path / "study"
    first = hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=4, study_dir=study)
    said = logged(monkeypatch, "warning")
    again = hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=4, study_dir=study)
    assert [t.config for t in again.trials] == [t.config for t in first.trials]
    assert said == [f"the study in {study} is complete, so nothing ran: the result is its stored trials "
                    f"(4 of max_trials=4); to extend it, pass max_trials=8"]
    said.clear()
    extended = hpo.optimize(bowl, SPACE, "random", min_budget=1, max_budget=1, max_trials=8, study_dir=study)
    assert len(extended.trials) == 8 and said == []


def test_a_call_on_a_study_that_was_given_its_total_budget_names_the_total_that_extends_it(tmp_path, monkeypatch):
    """The total it suggests is computed, as `hpo search` computes it: what the trials were
    given plus the total again, and a call with it trains more."""
    study = tmp_path / "study"
    first = hpo.optimize(bowl, SPACE, "random", min_budget=2, max_budget=2, total_budget=7, study_dir=study)
    assert [t.budget for t in first.trials] == [2.0] * 4     # the fourth passes 7; the search then stops
    said = logged(monkeypatch, "warning")
    hpo.optimize(bowl, SPACE, "random", min_budget=2, max_budget=2, total_budget=7, study_dir=study)
    assert said == [f"the study in {study} is complete, so nothing ran: the result is its stored trials "
                    f"(its trials were given 8 of total_budget=7); to extend it, pass total_budget=15"]
    said.clear()
    extended = hpo.optimize(bowl, SPACE, "random", min_budget=2, max_budget=2, total_budget=15, study_dir=study)
    assert len(extended.trials) > 4 and said == []
