"""The simulated executor under the real driver (hpo.executors.simulated, hpo.objective.simulation):
trials take the simulated seconds their objective returns, and nothing else changes."""

import logging
import math
import re

import pytest

import hpo
import hpo.errors
from hpo.clock import SimulatedClock
from hpo.executors.simulated import SimulatedExecutor
from hpo.jobs import EpochDone, TrainTask, TrialDone
from hpo.search import SEARCHERS
from hpo.trial import TrialState, trial_ids_text

SPACE = {"x": {"type": "float", "low": -5.0, "high": 5.0}, "y": {"type": "float", "low": 0.0, "high": 1.0}}


def objective(config, budget):
    """A value that improves with the budget, and a cost that grows with it and with y."""
    value = (config["x"] - 1.0) ** 2 + config["y"] + 1.0 / budget
    return {"objective": value, "cost": budget * (1.0 + 3.0 * config["y"])}


def run(searcher="asha", workers=1, simulate=True, **kwargs):
    kwargs.setdefault("max_trials", 40)
    return hpo.optimize(objective, SPACE, searcher, min_budget=1, max_budget=9, seed=3, workers=workers,
                        simulate=hpo.Simulation() if simulate else None, **kwargs)


def jobs(result):
    return [(t.trial_id, t.config, t.budget, t.continues, t.bracket, t.rung, t.value) for t in result.trials]


def timestamps(result):
    return [(t.created_at, t.started_at, t.finished_at) for t in result.trials]


@pytest.mark.parametrize("searcher", sorted(SEARCHERS))
def test_one_simulated_worker_asks_the_jobs_a_real_inline_run_asks(searcher):
    assert jobs(run(searcher, simulate=True)) == jobs(run(searcher, simulate=False))


@pytest.mark.parametrize("searcher", ["asha", "async_bohb"])
def test_a_simulated_run_repeats_exactly_with_the_same_seed(searcher):
    first, second = run(searcher, workers=8), run(searcher, workers=8)
    assert jobs(first) == jobs(second)
    assert timestamps(first) == timestamps(second)
    assert (first.simulation.simulated_seconds, first.simulation.busy_seconds) == \
        (second.simulation.simulated_seconds, second.simulation.busy_seconds)


def test_the_study_records_simulated_seconds_from_zero():
    result = run("random", workers=1, max_trials=5)
    # One worker: each trial starts when the one before finishes, and lasts its cost.
    clock = 0.0
    for trial in result.trials:
        assert trial.started_at == pytest.approx(clock)
        assert trial.duration == pytest.approx(trial.metrics["cost"])
        clock = trial.finished_at
    assert result.simulation.simulated_seconds == pytest.approx(clock)


def test_no_more_trials_overlap_than_there_are_workers_and_a_free_worker_starts_at_once():
    result = run("random", workers=4, max_trials=30)
    trials = result.trials
    for trial in trials:
        overlapping = [t for t in trials if t.started_at <= trial.started_at < t.finished_at]
        assert len(overlapping) <= 4
    # Random search never makes a worker wait: every start after the first four is a finish.
    finishes = {round(t.finished_at, 9) for t in trials}
    assert all(round(t.started_at, 9) in finishes for t in trials[4:])
    assert result.simulation.utilisation < 1.0          # the last trials drain one by one
    assert result.simulation.trials == 30


def test_time_limit_counts_simulated_seconds_and_keeps_the_trial_that_finished_past_it():
    result = run("asha", workers=4, max_trials=None, time_limit=60.0)
    assert result.stopped_because == "time_limit"
    assert all(t.started_at <= 60.0 for t in result.trials if t.started_at is not None)
    # The driver reads the limit between trials' ends: the first trial to finish past it is
    # recorded as finished (not interrupted and rerun), then the search stops and the trials
    # still running are interrupted, as on real workers. So the simulated time exceeds the limit.
    past = [t for t in result.trials if t.finished_at is not None and t.finished_at > 60.0]
    assert len(past) == 1 and past[0].state == TrialState.COMPLETE and past[0].value is not None
    assert result.simulation.simulated_seconds == pytest.approx(past[0].finished_at)
    interrupted = [t for t in result.trials if t.state == TrialState.INTERRUPTED]
    assert interrupted and all(t.value is None and t.finished_at is None for t in interrupted)


def test_the_trials_a_time_limit_interrupts_are_logged_on_one_line_with_their_ids_as_ranges(caplog):
    # Read at the runner's logger: an earlier in-process search in this test process may have
    # set the `hpo` logger not to propagate to the root, where caplog listens.
    runner_log = logging.getLogger("hpo.driver.runner")
    runner_log.addHandler(caplog.handler)
    try:
        with caplog.at_level("WARNING", logger="hpo.driver.runner"):
            result = run("random", workers=32, max_trials=None, time_limit=30.0)
    finally:
        runner_log.removeHandler(caplog.handler)
    interrupted = [t.trial_id for t in result.trials if t.state == TrialState.INTERRUPTED]
    # One record, seen once or twice (at the logger and, if it propagates, at the root).
    lines = list({id(r): r.getMessage() for r in caplog.records if "interrupted" in r.getMessage()}.values())
    assert len(interrupted) == 31
    # No study_dir: the study is a scratch folder, so nothing promises a resume.
    assert lines == [f"31 trials interrupted ({trial_ids_text(interrupted)}): time limit reached"]


@pytest.mark.parametrize("ids, text", [([], ""), ([4], "4"), ([5, 0, 1, 2, 7, 9, 10, 11, 3], "0-3, 5, 7, 9-11"),
                                       (range(1984, 2048), "1984-2047"), ([2, 2, 3], "2-3")])
def test_trial_ids_read_as_ranges(ids, text):
    assert trial_ids_text(ids) == text


def test_utilisation_is_the_workers_busy_share_of_the_simulated_time():
    result = run("hyperband", workers=4, max_trials=None, time_limit=200.0)
    report = result.simulation
    end = report.simulated_seconds
    busy = sum((t.finished_at if t.finished_at is not None else end) - t.started_at
               for t in result.trials if t.started_at is not None)
    assert report.busy_seconds == pytest.approx(busy)
    assert report.utilisation == pytest.approx(busy / (4 * end))
    # Stopped by the time limit, so no drain at the end: random search never idles a worker.
    random = run("random", workers=4, max_trials=None, time_limit=200.0).simulation
    assert random.utilisation == pytest.approx(1.0)


def test_the_driver_decision_after_every_finished_trial_is_measured():
    report = run("asha", workers=4, max_trials=30).simulation
    assert len(report.decision_seconds) >= 26
    assert all(d >= 0 for d in report.decision_seconds)
    assert report.median_decision_seconds is not None


def test_a_resumed_promotion_costs_only_its_epochs_beyond_its_parents():
    def by_budget(config, budget):
        return {"objective": config["x"] ** 2 + 1 / budget, "cost": 10.0 * budget}

    result = hpo.optimize(by_budget, SPACE, "asha", min_budget=1, max_budget=9, max_trials=30, seed=0,
                          workers=2, simulate=hpo.Simulation(resumes=True))
    rows = {t.trial_id: t for t in result.trials}
    promoted = [t for t in result.trials if t.continues is not None and t.finished_at is not None]
    assert promoted
    for trial in promoted:
        assert trial.duration == pytest.approx(10.0 * (trial.budget - rows[trial.continues].budget))


def test_a_resumed_simulation_goes_on_from_its_clock_and_charges_promotions_of_earlier_trials_their_rest(tmp_path):
    def by_budget(config, budget):
        return {"objective": config["x"] ** 2 + 1 / budget, "cost": 10.0 * budget}

    def search(max_trials):
        return hpo.optimize(by_budget, SPACE, "asha", min_budget=1, max_budget=9, max_trials=max_trials, seed=0,
                            workers=2, study_dir=tmp_path / "study", simulate=hpo.Simulation(resumes=True))

    first = search(4)           # four trials at budget 1; ASHA promotes one of them next
    ended = max(t for row in first.trials for t in (row.created_at, row.started_at, row.finished_at) if t is not None)
    second = search(40)
    kept = {t.trial_id for t in first.trials if t.state == TrialState.COMPLETE}
    new = [t for t in second.trials if t.trial_id not in kept]
    assert new and all(t.started_at >= ended for t in new if t.started_at is not None)
    rows = {t.trial_id: t for t in second.trials}
    across = [t for t in new if t.continues in kept and t.finished_at is not None]
    assert across, "a promotion of a trial finished before the resume"
    for trial in across:
        assert trial.duration == pytest.approx(10.0 * (trial.budget - rows[trial.continues].budget))


def test_failed_calls_cost_no_simulated_time_and_the_search_goes_on():
    def half_fails(config, budget):
        if config["x"] > 0:
            raise ValueError("this half of the space fails")
        return {"objective": config["x"] ** 2, "cost": 5.0}

    result = hpo.optimize(half_fails, SPACE, "random", min_budget=1, max_budget=1, max_trials=30, seed=0, workers=1,
                          simulate=hpo.Simulation(), initial_configs=[{"x": -1.0, "y": 0.5}])
    failed = [t for t in result.trials if t.state == TrialState.FAILED]
    complete = [t for t in result.trials if t.state == TrialState.COMPLETE]
    assert failed and complete and len(failed) + len(complete) == 30
    assert all(t.duration == 0.0 and "this half of the space fails" in t.error for t in failed)
    assert result.simulation.simulated_seconds == pytest.approx(5.0 * len(complete))
    assert result.simulation.busy_seconds == pytest.approx(5.0 * len(complete))


def test_utilisation_is_nan_when_no_simulated_time_passed():
    def always_fails(config, budget):
        raise ValueError("no")

    result = hpo.optimize(always_fails, SPACE, "random", min_budget=1, max_budget=1, max_trials=2,
                          simulate=hpo.Simulation())
    assert result.simulation.simulated_seconds == 0.0
    assert math.isnan(result.simulation.utilisation)


@pytest.mark.parametrize("returns, said", [(lambda x: x ** 2, "only its value ("),
                                           (lambda x: {"objective": x ** 2, "seconds": 3.0}, "{'objective': ")],
                         ids=["a float", "a dict without cost"])
def test_an_objective_that_never_returns_its_cost_is_refused_on_the_first_call_showing_the_dict(tmp_path, returns,
                                                                                                said):
    def costless(config, budget):
        return returns(config["x"])

    with pytest.raises(hpo.errors.UserInputError) as caught:
        hpo.optimize(costless, SPACE, "random", min_budget=1, max_budget=9, max_trials=5, study_dir=tmp_path / "s",
                     simulate=hpo.Simulation())
    message = str(caught.value)
    assert "the objective must return a dict such as {'objective': 0.25, 'cost': 120.0}" in message
    assert f"its first call (trial 0) returned {said}" in message and "with no 'cost'" in message


@pytest.mark.parametrize("arguments, kind, said", [({"cost": ""}, ValueError, "cost=...): expected the name"),
                                                   ({"cost": 3}, TypeError, "cost=...): expected the name"),
                                                   ({"resumes": "yes"}, TypeError, "resumes=...): expected True")])
def test_a_simulation_of_the_wrong_kind_is_refused_as_it_is_built(arguments, kind, said):
    with pytest.raises(kind, match=re.escape(said)):
        hpo.Simulation(**arguments)


def test_a_call_that_returned_its_cost_is_charged_it_even_where_its_value_fails_the_trial():
    def diverging(config, budget):
        if config["x"] > 0:
            raise RuntimeError("diverged before saying its cost")
        return {"objective": float("nan") if config["x"] < -1 else config["x"] ** 2, "cost": 100.0}

    result = hpo.optimize(diverging, SPACE, "random", min_budget=1, max_budget=1, max_trials=30, seed=0,
                          simulate=hpo.Simulation(), max_consecutive_failures=30)
    raised = [t for t in result.trials if "RuntimeError" in (t.error or "")]
    nan = [t for t in result.trials if "was nan" in (t.error or "")]
    assert raised and nan
    assert all(t.finished_at == t.started_at for t in raised)
    assert all(t.finished_at - t.started_at == 100.0 for t in nan)
    assert result.simulation.busy_seconds == 100.0 * (len(result.trials) - len(raised))
    shown = repr(result.simulation)
    assert f"decisions={len(result.simulation.decision_seconds)} (median " in shown and len(shown) < 200


def test_after_a_call_with_its_cost_a_call_without_fails_only_its_trial():
    def sometimes(config, budget):
        return {"objective": config["x"] ** 2, **({"cost": 1.0} if config["x"] < 0 else {})}

    result = hpo.optimize(sometimes, SPACE, "random", min_budget=1, max_budget=1, max_trials=40, seed=0,
                          simulate=hpo.Simulation(), initial_configs=[{"x": -1.0, "y": 0.5}])
    later = result.trials
    assert {t.state for t in later if t.config["x"] < 0} == {TrialState.COMPLETE}
    costless = [t for t in later if t.config["x"] >= 0]
    assert costless and all(t.state == TrialState.FAILED and "'cost'" in t.error for t in costless)


def test_a_free_trial_fails_so_a_search_with_only_a_time_limit_still_ends():
    # A cost of 0 would never move the clock past the time limit: the search would not end.
    def free(config, budget):
        return {"objective": config["x"] ** 2, "cost": 0.0}

    result = hpo.optimize(free, SPACE, "random", min_budget=1, max_budget=1, time_limit=60, seed=0,
                          simulate=hpo.Simulation(), workers=2, max_consecutive_failures=4)
    assert result.stopped_because == "max_consecutive_failures"
    states = [t.state for t in result.trials]
    assert states == [TrialState.FAILED] * 4 + [TrialState.INTERRUPTED]     # the other worker's
    assert "in seconds > 0" in result.trials[0].error


def test_the_executor_hands_back_trials_in_the_order_they_finish():
    clock = SimulatedClock()
    executor = SimulatedExecutor(lambda config, budget: {"objective": 0.0, "cost": config["c"]}, workers=3,
                                 clock=clock)
    for trial_id, cost in enumerate([5.0, 1.0, 3.0]):
        executor.submit(TrainTask(trial_id=trial_id, config={"c": cost}, start_epoch=0, end_epoch=1, seed=0,
                                  checkpoint_out=""))
    order = []
    while executor.running():
        event = executor.next_event()
        if isinstance(event, TrialDone):
            order.append((event.trial_id, clock()))
        else:
            assert isinstance(event, EpochDone)
    assert order == [(1, 1.0), (2, 3.0), (0, 5.0)]
    executor.close()
    assert executor.report().utilisation == pytest.approx(9.0 / 15.0)
    assert math.isclose(executor.report().busy_seconds, 9.0)


@pytest.mark.parametrize("searcher, top, options, resumes, warned", [
    ("asha", 9, {}, False, "Simulation(resumes=False) charges it its whole cost"),
    ("bohb", 9, {"resumes": False}, True, "Simulation(resumes=True) charges it only what it adds"),
    ("asha", 9, {}, True, None),
    ("bohb", 9, {"resumes": False}, False, None),
    ("random", 9, {}, False, None),         # no job continues another: nothing to count two ways
    ("asha", 1, {}, False, None),           # one budget: no promotion either
])
def test_a_total_budget_counted_unlike_the_simulated_time_is_said(monkeypatch, searcher, top, options, resumes,
                                                                  warned):
    import hpo.objective.optimization

    def timed(config, budget):
        return {"objective": config["x"] ** 2 + 1 / budget, "cost": 60.0 * budget}

    lines = []
    monkeypatch.setattr(hpo.objective.optimization.log, "warning", lambda message, *args: lines.append(message % args))
    hpo.optimize(timed, SPACE, searcher, min_budget=1, max_budget=top, total_budget=30, workers=4,
                 options=options, simulate=hpo.Simulation(resumes=resumes))
    said = [line for line in lines if "total_budget counts" in line]
    assert (said == []) if warned is None else (len(said) == 1 and warned in said[0]), said
