"""A search killed mid-way resumes exactly where it stopped (synthetic objective, no TF)."""

import pytest

import hpo.errors
from hpo.config import experiment_from_dict
from hpo.driver.runner import Runner, SearchAborted
from hpo.executors.function import FunctionExecutor
from hpo.search import SEARCHERS, make_searcher
from hpo.study.resume import ReplayMismatch, prepare_study, replay
from hpo.trial import TrialState
from tests.support.searcher_harness import SPACE, objective

ALGORITHMS = list(SEARCHERS)      # every searcher, so a new one is held to the same resume


class Crash(BaseException):
    """Stands in for kill -9: nothing in the runner gets to clean up after it."""


def experiment(tmp_path, algorithm, **search):
    return experiment_from_dict({
        "name": "resume", "seed": 5, "data": {"dataset": "synthetic"}, "space": SPACE,
        "search": {"algorithm": algorithm, "objective": "objective", "direction": "minimize",
                   "min_budget": 1, "max_budget": 9, "eta": 3, "max_trials": 30, **search},
        "output": {"dir": str(tmp_path)}})


def run(exp, objective_fn, fresh=False, on_progress=None):
    """(summary, study) of one run; `on_progress(progress, study)` after each finished trial."""
    study = prepare_study(exp, exp.study_dir, fresh=fresh)
    s = exp.search
    searcher = make_searcher(s.algorithm, exp.space, seed=exp.seed, direction=s.direction, min_budget=s.min_budget,
                             max_budget=s.max_budget, eta=s.eta, options=s.options)
    runner = Runner(exp, study, searcher, FunctionExecutor(objective_fn, "objective"))
    if on_progress is not None:
        runner.on_progress = lambda progress: on_progress(progress, study)
    try:
        return runner.run(), study
    except Crash:
        return None, study


def fails_on_sgd(config, budget):
    """The harness's objective, raising for every config that uses SGD."""
    if config["opt"] == "sgd":
        raise RuntimeError("sgd diverged")
    return objective(config, budget)


def sequence(study):
    return [(t.trial_id, tuple(sorted(t.config.items())), t.budget, t.continues, t.state) for t in study.trials()]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("kill_at", [1, 7, 18])
def test_resumed_search_asks_the_same_sequence(tmp_path, algorithm, kill_at):
    reference, ref_study = run(experiment(tmp_path / "ref", algorithm), objective)
    calls = {"n": 0}

    def crashing(config, budget):
        calls["n"] += 1
        if calls["n"] == kill_at:
            raise Crash()
        return objective(config, budget)

    exp = experiment(tmp_path / "killed", algorithm)
    summary, study = run(exp, crashing)
    assert summary is None
    states = [t.state for t in study.trials()]
    assert states.count(TrialState.RUNNING) == 1 and states.count(TrialState.COMPLETE) == kill_at - 1
    study.close()

    summary, resumed = run(exp, objective)
    assert summary.stopped_because == "max_trials"
    assert sequence(resumed) == sequence(ref_study)
    rerun = resumed.trial(kill_at - 1)
    assert rerun.attempts == 2 and rerun.state == TrialState.COMPLETE


def test_resume_extends_a_finished_search_when_max_trials_grows(tmp_path):
    run(experiment(tmp_path, "hyperband", max_trials=10), objective)
    summary, study = run(experiment(tmp_path, "hyperband", max_trials=16), objective)
    assert summary.trials_finished_now == 6 and len(study.trials()) == 16


def test_replay_refuses_a_history_the_searcher_does_not_reproduce(tmp_path):
    exp = experiment(tmp_path, "random", max_trials=3)
    _, study = run(exp, objective)
    other = make_searcher("random", exp.space, seed=99, direction="minimize", min_budget=1, max_budget=9, eta=3)
    hint = r"name the values the study ran with in the searcher.s options \(search\.options.*--fresh"
    with pytest.raises(ReplayMismatch, match=r"trial 0 .*" + hint):
        replay(study, other)


def test_changed_search_options_resume_only_where_they_replay_every_ask(tmp_path):
    """A study may name, on resume, options it ran with when a default changed between versions:
    the replay is the check. Options that ask otherwise are refused, and the study keeps the
    experiment it had."""
    _, study = run(experiment(tmp_path, "bohb", max_trials=20, options={"top_n_percent": 15}), objective)
    stored = study.experiment()
    study.close()
    other = experiment(tmp_path, "bohb", max_trials=24, options={"top_n_percent": 15, "initial_design": "uniform"})
    hint = r"name the values the study ran with in the searcher.s options \(search\.options"
    with pytest.raises(ReplayMismatch, match=hint) as refused:
        run(other, objective)
    # It names the option this run changed, the likely cause.
    assert "this run changed search.options.initial_design: '<absent>' -> 'uniform'" in str(refused.value)
    assert isinstance(refused.value, hpo.errors.UserInputError)       # the CLI's exit 2, one message
    reopened = prepare_study(experiment(tmp_path, "bohb", max_trials=20, options={"top_n_percent": 15}), tmp_path)
    assert reopened.experiment() == stored
    reopened.close()
    # The same asks under another spelling of the options: resumed, and the study records them.
    summary, resumed = run(experiment(tmp_path, "bohb", max_trials=24, options={"top_n_percent": 15.0,
                                                                                "num_samples": 64}), objective)
    assert summary.trials_finished_now == 4
    assert resumed.experiment()["search"]["options"] == {"top_n_percent": 15.0, "num_samples": 64}


def test_failing_trials_are_recorded_and_the_search_goes_on(tmp_path):
    summary, study = run(experiment(tmp_path, "random", max_trials=12), fails_on_sgd)
    failed = [t for t in study.trials() if t.state == TrialState.FAILED]
    assert failed and all("sgd diverged" in t.error for t in failed)
    assert len(study.trials()) == 12 and summary.best is not None


def test_consecutive_failures_stop_the_search_with_the_last_error(tmp_path):
    def always(config, budget):
        raise ValueError("bad objective")

    with pytest.raises(SearchAborted, match="last 3 trials all failed.*bad objective"):
        run(experiment(tmp_path, "random", max_consecutive_failures=3), always)


def test_time_limit_interrupts_and_resume_finishes(tmp_path, monkeypatch):
    import hpo.driver.runner as runner_module
    clock = {"t": 0.0}
    monkeypatch.setattr(runner_module.time, "monotonic", lambda: clock["t"])

    def slow(config, budget):
        clock["t"] += 10.0
        return objective(config, budget)

    summary, study = run(experiment(tmp_path, "asha", time_limit=35), slow)
    assert summary.stopped_because == "time_limit"
    assert 3 <= len([t for t in study.trials() if t.state == TrialState.COMPLETE]) <= 5


def test_an_interrupt_before_the_executor_takes_a_trial_still_marks_it_interrupted(tmp_path):
    """Ctrl-C or SIGTERM can land after the study marks a trial running and before the
    executor holds it (an inline executor's first submit builds its trainer): that trial is
    interrupted like the others, not left 'running'."""
    class InterruptedOnThirdSubmit(FunctionExecutor):
        submitted = 0

        def submit(self, task):
            self.submitted += 1
            if self.submitted == 3:
                raise KeyboardInterrupt
            super().submit(task)

    exp = experiment(tmp_path, "random")
    study = prepare_study(exp, exp.study_dir)
    searcher = make_searcher("random", exp.space, seed=exp.seed, direction="minimize", min_budget=1,
                             max_budget=9, eta=3)
    summary = Runner(exp, study, searcher, InterruptedOnThirdSubmit(objective, "objective")).run()
    assert summary.stopped_because == "interrupted"
    states = [t.state for t in study.trials()]
    assert TrialState.RUNNING not in states
    assert TrialState.INTERRUPTED in states


class LostCluster:
    """Takes one trial, then loses its cluster: reading events and cancelling both raise."""

    def __init__(self):
        self.running_ids: list[int] = []

    def free_slots(self):
        return 1 - len(self.running_ids)

    def idle_workers(self):
        return self.free_slots()

    def running(self):
        return list(self.running_ids)

    def submit(self, task):
        self.running_ids.append(task.trial_id)

    def has_event(self):
        return False

    def next_event(self):
        raise ConnectionError("the scheduler is gone")

    def cancel(self, trial_id):
        raise ConnectionError("the scheduler is gone")

    def close(self):
        pass


def test_a_driver_failure_marks_its_running_trials_interrupted_even_when_cancelling_fails(tmp_path):
    """The study says what was running when the driver failed, as on Ctrl-C, so that a resume
    runs those trials again; the executor's failure is the error the caller sees."""
    exp = experiment(tmp_path, "random")
    study = prepare_study(exp, exp.study_dir)
    s = exp.search
    searcher = make_searcher(s.algorithm, exp.space, seed=exp.seed, direction=s.direction, min_budget=s.min_budget,
                             max_budget=s.max_budget, eta=s.eta)
    try:
        with pytest.raises(ConnectionError, match="the scheduler is gone"):
            Runner(exp, study, searcher, LostCluster()).run()
        assert [(t.trial_id, t.state) for t in study.trials()] == [(0, TrialState.INTERRUPTED)]
    finally:
        study.close()
    _, resumed = run(exp, objective)
    try:
        assert sum(t.state == TrialState.COMPLETE for t in resumed.trials()) == 30
    finally:
        resumed.close()


def test_a_study_run_uncapped_resumes_once_it_names_max_good_null(tmp_path):
    """Studies of the BOHB family from before l(x) was capped (`max_good`, 25 now) replay only
    with the cap off; the refusal says so. A cap of 2 stands in for the new default here, as it
    binds within this short search."""
    import hpo
    space = {"x": {"type": "float", "low": 0, "high": 1}, "k": {"type": "int", "low": 1, "high": 8}}

    def bowl(config, budget):
        return (config["x"] - 0.3) ** 2 + 0.1 * abs(config["k"] - 3) + 1 / budget
    study = tmp_path / "study"
    hpo.optimize(bowl, space, "bohb", min_budget=1, max_budget=9, max_trials=60, study_dir=study,
                 options={"max_good": None})
    with pytest.raises(hpo.errors.UserInputError, match=r"max_good \(null, uncapped, before it became 25\)"):
        hpo.optimize(bowl, space, "bohb", min_budget=1, max_budget=9, max_trials=70, study_dir=study,
                     options={"max_good": 2})
    resumed = hpo.optimize(bowl, space, "bohb", min_budget=1, max_budget=9, max_trials=70, study_dir=study,
                           options={"max_good": None})
    assert len(resumed.trials) == 70


def test_the_progress_count_is_the_studys_finished_trials_through_failures_and_a_resume(tmp_path):
    # The runner keeps the count as results are recorded rather than counting the study's
    # rows after every trial: it must agree with the study, the resumed run's earlier trials
    # and the failed ones included.
    seen = []

    def count(progress, study):
        seen.append((progress.finished, study.count(TrialState.COMPLETE, TrialState.FAILED)))

    run(experiment(tmp_path, "hyperband", max_trials=8), fails_on_sgd, fresh=True, on_progress=count)
    _, study = run(experiment(tmp_path, "hyperband", max_trials=20), fails_on_sgd, on_progress=count)
    assert any(t.state == TrialState.FAILED for t in study.trials())
    assert [kept for kept, _ in seen] == [counted for _, counted in seen]
    assert seen[-1][0] == 20 and len(seen) == 20
