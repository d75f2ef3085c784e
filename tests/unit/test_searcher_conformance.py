"""Every searcher passes the same behavioural suite (the Optuna habit: conformance tests)."""

import functools
import math
import re

import numpy as np
import pytest

from hpo.search import ASHA, BOHB
from hpo.search import SEARCHERS as REGISTERED
from hpo.trial import TrialResult, TrialState
from tests.support.searcher_harness import SPACE, drive, objective, signature

# Every searcher `search.algorithm` can name, read from the registry, so that a new one is held
# to this suite without an edit here; and BOHB's other config models, which must conform too.
SEARCHERS = {**REGISTERED, "bohb_paper_kde": functools.partial(BOHB, model="kde"),
             "bohb_tpe": functools.partial(BOHB, model="tpe")}

BUDGETS = dict(min_budget=1, max_budget=27, eta=3)


def make(name, seed=0, **kw):
    return SEARCHERS[name](SPACE, seed=seed, **{**BUDGETS, **kw})


@pytest.fixture(params=sorted(SEARCHERS))
def name(request):
    return request.param


@pytest.mark.parametrize("workers", [1, 4])
def test_same_seed_gives_same_sequence(name, workers):
    a = drive(make(name, seed=7), 60, workers=workers)
    b = drive(make(name, seed=7), 60, workers=workers)
    assert signature(a) == signature(b)


def test_different_seeds_differ(name):
    assert signature(drive(make(name, seed=1), 20)) != signature(drive(make(name, seed=2), 20))


def test_configs_stay_inside_the_space_and_budgets_within_bounds_and_no_new_config_repeats(name):
    # One run for the three properties: a run's asks are those of a shorter run and more.
    searcher = make(name)
    check_inside_and_fresh(searcher, drive(searcher, 150, workers=3))


def check_inside_and_fresh(searcher, log):
    """Every job's config inside the space and its budget within bounds; no new config twice."""
    for job, _ in log:
        assert searcher.space.contains(job.config), job.config
        assert 1 - 1e-9 <= job.budget <= 27 + 1e-9
    fresh = [tuple(sorted(j.config.items())) for j, _ in log if j.continues is None]
    assert len(fresh) == len(set(fresh))


def test_continued_jobs_grow_the_budget_of_the_same_config(name):
    log = drive(make(name), 150, workers=2)
    by_id = {job.trial_id: job for job, _ in log}
    for job, _ in log:
        if job.continues is not None:
            parent = by_id[job.continues]
            assert job.config == parent.config and job.budget > parent.budget


def test_failed_results_are_tolerated(name):
    searcher = make(name)
    log = drive(searcher, 80, workers=2, fail_every=3)
    assert any(r.state == TrialState.FAILED for _, r in log)
    assert searcher.ask() is not None or searcher.pending


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_tell_accepts_floats_and_unusable_values(name, bad):
    searcher = make(name)
    job = searcher.ask()
    searcher.tell(job, bad)
    assert not searcher.history[-1][1].ok
    job = searcher.ask()
    searcher.tell(job, 0.5)
    assert searcher.history[-1][1].value == 0.5


@pytest.mark.parametrize("text", ["0.3", b"1", True, np.complex128(1 + 2j)])
def test_text_a_bool_or_no_single_real_told_as_a_result_is_refused_and_the_job_stays_pending(name, text):
    """float("0.3") and float(True) would rank them as values; numpy reads a complex number as its real part."""
    searcher = make(name)
    job = searcher.ask()
    with pytest.raises(TypeError, match="expected a number"):
        searcher.tell(job, text)
    assert job.trial_id in searcher.pending
    searcher.tell(job, 0.25)
    assert searcher.history[-1][1].value == 0.25


def test_a_job_told_is_the_one_asked_and_a_refused_one_stays_pending(name):
    """An edited job, or another searcher's of the same id, would be recorded as given."""
    import dataclasses
    searcher = make(name)
    job = searcher.ask()
    for other in (dataclasses.replace(job, budget=1000.0), make(name, seed=5).ask()):
        if other == job:
            continue
        with pytest.raises(ValueError, match=f"trial {job.trial_id} was asked as"):
            searcher.tell(other, 0.5)
        assert searcher.pending == {job.trial_id: job} and not searcher.history
    searcher.tell(job, 0.5)
    assert searcher.history == [(job, TrialResult(0.5))]


@pytest.mark.parametrize("arguments, kind, message", [
    ({"min_budget": "1"}, TypeError, "min_budget must be a number, got str '1'"),
    ({"max_budget": float("inf")}, ValueError, "max_budget must be a finite number, got inf"),
    ({"eta": float("nan")}, ValueError, "eta must be a finite number"),
    ({"seed": "a"}, TypeError, "seed must be a whole number >= 0, got str 'a'"),
    ({"seed": -1}, ValueError, "seed must be a whole number >= 0, got -1"),
])
def test_a_schedule_or_seed_of_the_wrong_kind_is_refused_by_name(name, arguments, kind, message):
    with pytest.raises(kind, match=re.escape(message)):
        make(name, **arguments)


@pytest.mark.parametrize("make_one, message", [
    (lambda: BOHB(SPACE, model="kde", min_points_in_model=0), "min_points_in_model must be an integer >= 1"),
    (lambda: BOHB(SPACE, n_startup=-2), "n_startup must be an integer >= 1"),
    (lambda: BOHB(SPACE, model="tpe", n_startup=2.5), "n_startup must be an integer >= 1 or None, got 2.5"),
    (lambda: SEARCHERS["freeze_thaw"](SPACE, n_startup=0), "n_startup must be an integer >= 1"),
    (lambda: ASHA(SPACE, brackets=1.5), "brackets must be a whole number between 1 and 4"),
])
def test_a_model_count_out_of_range_is_refused_when_the_searcher_is_made(make_one, message):
    """Not on the third ask, as a ZeroDivisionError."""
    with pytest.raises(ValueError, match=re.escape(message)):
        make_one()


def test_an_option_the_searcher_does_not_take_is_refused_with_those_it_takes():
    from hpo.search import make_searcher, option_names
    for algorithm in REGISTERED:
        with pytest.raises(TypeError, match=rf"{algorithm} got an unexpected keyword argument 'zz'; it takes "
                                            rf"{re.escape(', '.join(option_names(algorithm)))}$"):
            make_searcher(algorithm, SPACE, seed=0, direction="minimize", options={"zz": 1}, **BUDGETS)


def test_a_told_dict_missing_a_name_lists_each_name_it_must_hold_once():
    searcher = ASHA(SPACE, objectives=["error", "params"], constraints=["params <= 20000"], **BUDGETS)
    with pytest.raises(ValueError, match=r"the told dict has no 'params'.*it must hold error, params$"):
        searcher.tell(searcher.ask(), {"error": 0.1})


def test_telling_an_unknown_job_is_an_error(name):
    searcher = make(name)
    job = searcher.ask()
    searcher.tell(job, 1.0)
    with pytest.raises(KeyError):
        searcher.tell(job, 1.0)


@pytest.mark.parametrize("workers", [1, 3])
def test_replayed_history_rebuilds_the_live_state(name, workers):
    check_replay(functools.partial(make, name, seed=3), workers)


def check_replay(build, workers, value_of=lambda job: math.sin(job.trial_id) + job.config["x"], last=1.0):
    live = build()
    events = []
    pending = []
    for _ in range(70):
        while len(pending) < workers:
            job = live.ask()
            if job is None:
                break
            events.append(("ask", job))
            pending.append(job)
        job = pending.pop(0)
        value = value_of(job)
        live.tell(job, value)
        events.append(("tell", job, value))
    replayed = build()
    for event in events:
        if event[0] == "ask":
            assert replayed.ask() == event[1]
        else:
            replayed.tell(replayed.pending[event[1].trial_id], event[2])
    assert replayed.pending.keys() == live.pending.keys()
    for job in list(live.pending.values()):   # both finish their pending work the same way
        live.tell(job, last)
        replayed.tell(replayed.pending[job.trial_id], last)
    drive_on = drive if last == 1.0 else drive_several
    assert signature(drive_on(live, 40, workers=workers)) == signature(drive_on(replayed, 40, workers=workers))


@pytest.mark.parametrize("workers", [1, 3])
def test_replay_rebuilds_the_state_with_failures(name, workers):
    # The models learn from failures (a failed config is their worst result): a replay tells
    # them the same failures in the same order.
    check_replay(functools.partial(make, name, seed=5), workers,
                 value_of=lambda job: None if job.trial_id % 4 == 1 else math.sin(job.trial_id) + job.config["x"])


def test_maximize_prefers_large_values(name):
    searcher = make(name, direction="maximize")
    log = drive(searcher, 60)
    assert searcher.loss_of(TrialResult(value=2.0)) < searcher.loss_of(TrialResult(value=1.0))
    best_job, best_result = searcher.best
    same_budget = [r.value for j, r in log if r.ok and j.budget == best_job.budget]
    assert best_result.value == max(same_budget)


# --- the same guarantees with user priors and enqueued configs ---------------------------------

PRIOR_SPACE = {**SPACE,
               "x": {**SPACE["x"], "prior": 2.0, "prior_confidence": "high"},
               "lr": {**SPACE["lr"], "prior": 3e-3},
               "opt": {**SPACE["opt"], "prior": "sgd", "prior_confidence": "low"}}
ENQUEUED = [{"x": 2.0, "lr": 0.003, "n": 1, "opt": "adam"},
            {"x": -1.0, "lr": 0.05, "n": 8, "opt": "rmsprop", "momentum": 0.5}]


def make_guided(name, seed=0):
    searcher = SEARCHERS[name](PRIOR_SPACE, seed=seed, **BUDGETS)
    for config in ENQUEUED:
        searcher.enqueue(config)
    return searcher


@pytest.mark.parametrize("workers", [1, 4])
def test_priors_and_enqueued_configs_are_deterministic(name, workers):
    a = drive(make_guided(name, seed=7), 80, workers=workers)
    b = drive(make_guided(name, seed=7), 80, workers=workers)
    assert signature(a) == signature(b)
    assert signature(a) != signature(drive(make_guided(name, seed=8), 80, workers=workers))


def test_priors_and_enqueued_configs_stay_inside_the_space(name):
    searcher = make_guided(name)
    check_inside_and_fresh(searcher, drive(searcher, 150, workers=3))


@pytest.mark.parametrize("workers", [1, 3])
def test_replay_rebuilds_the_state_with_priors_and_enqueued_configs(name, workers):
    check_replay(functools.partial(make_guided, name, seed=3), workers)


# --- several objectives (two and three) and a constraint ----------------------------------------

# FreezeThaw's expected improvement needs one objective: it refuses several (tests/test_freeze_thaw.py).
MO_SEARCHERS = {**{k: v for k, v in SEARCHERS.items() if k not in ("bohb_paper_kde", "bohb_tpe", "freeze_thaw")},
                "bohb_parego": functools.partial(BOHB, split="parego"),
                "asha_crowding": functools.partial(ASHA, tie_break="crowding")}


def several(job, n_objectives):
    """Conflicting objectives of the harness's space: the harness's loss, distance from the
    other end of x, and a cost growing with n; "n <= 6" is the constraint."""
    c = job.config
    values = {"loss": objective(c, job.budget), "far": (c["x"] + 4) ** 2 / (1 + job.budget / 27),
              "cost": c["n"] * (1 + abs(math.log10(c["lr"]))), "n": c["n"]}
    if n_objectives == 2:
        return [values["loss"], values["far"]] if job.trial_id % 2 else values   # a vector or a dict
    # What the runner tells (and a resumed study replays): the metrics, the objectives among them.
    return TrialResult(value=values["loss"], metrics=values) if job.trial_id % 2 else values


def make_several(name, n_objectives, seed=0, enqueue=False):
    objectives = ["loss", {"name": "far", "direction": "minimize"}, "cost"][:n_objectives]
    constraints = [] if n_objectives == 2 else ["n <= 6"]
    searcher = MO_SEARCHERS[name](SPACE, seed=seed, objectives=objectives, constraints=constraints, **BUDGETS)
    for config in ENQUEUED if enqueue else ():
        searcher.enqueue(config)
    return searcher


def drive_several(searcher, n_jobs, workers=1):
    n_objectives = len(searcher.goals.objectives)
    return drive(searcher, n_jobs, workers, told=lambda job: several(job, n_objectives))


@pytest.fixture(params=sorted(MO_SEARCHERS))
def mo_name(request):
    return request.param


def test_none_told_with_several_objectives_is_a_failure(mo_name):
    searcher = MO_SEARCHERS[mo_name](SPACE, objectives=["a", "b"], **BUDGETS)
    job = searcher.ask()
    searcher.tell(job, None)
    assert searcher.history[-1][1].state == TrialState.FAILED


@pytest.mark.parametrize("n_objectives", [2, 3])
def test_several_objectives_are_deterministic(mo_name, n_objectives):
    a = drive_several(make_several(mo_name, n_objectives, seed=7, enqueue=True), 70, workers=3)
    b = drive_several(make_several(mo_name, n_objectives, seed=7, enqueue=True), 70, workers=3)
    assert signature(a) == signature(b)
    assert signature(a) != signature(drive_several(make_several(mo_name, n_objectives, seed=8), 70, workers=3))
    assert all(len(r.values) == n_objectives for _, r in a)


@pytest.mark.parametrize("n_objectives", [2, 3])
def test_several_objectives_stay_in_bounds_and_run_enqueued_configs_first(mo_name, n_objectives):
    searcher = make_several(mo_name, n_objectives, enqueue=True)
    log = drive_several(searcher, 150, workers=3)
    assert [dict(j.config) for j, _ in sorted(log, key=lambda jr: jr[0].trial_id)[:2]] == ENQUEUED
    check_inside_and_fresh(searcher, log)
    front = searcher.pareto_front()
    assert front
    if n_objectives == 3:
        assert all(job.config["n"] <= 6 for job, _ in front)


@pytest.mark.parametrize("n_objectives", [2, 3])
def test_several_objectives_replay(mo_name, n_objectives):
    check_replay(functools.partial(make_several, mo_name, n_objectives, seed=3, enqueue=True), 2,
                 value_of=lambda job: several(job, n_objectives),
                 last=[1.0, 2.0] if n_objectives == 2 else {"loss": 1.0, "far": 2.0, "cost": 3.0, "n": 9.0})


def test_every_option_a_refusal_lists_is_one_the_searcher_takes(name):
    """The names `option_names` offers in the message for an unknown option are real: each one,
    given a value no searcher takes, is refused for its value, never as an unknown name."""
    from hpo.search import make_searcher, option_names
    algorithm = name if name in REGISTERED else "bohb"
    options = {} if name in REGISTERED else dict(SEARCHERS[name].keywords)     # BOHB's other models
    for option in option_names(algorithm, options):
        try:
            make_searcher(algorithm, SPACE, seed=0, direction="minimize", **BUDGETS,
                          options={**options, option: object()} if option != "model" else options)
        except TypeError as exc:
            assert "unexpected keyword argument" not in str(exc), (algorithm, option)
        except ValueError:
            pass


def test_a_trial_result_of_the_wrong_kind_is_refused_where_it_is_made():
    """Not later, inside `tell`, after the searcher had half-recorded it."""
    with pytest.raises(TypeError, match="value must be a number or None, got str '0.5'"):
        TrialResult("0.5")
    with pytest.raises(TypeError, match="got bool True"):
        TrialResult(True)
    assert TrialResult(1.0, state="complete").state is TrialState.COMPLETE
    with pytest.raises(ValueError, match="state must be one of"):
        TrialResult(1.0, state="done")
    with pytest.raises(TypeError, match="values must be numbers, got '2'"):
        TrialResult(1.0, values=(1.0, "2"))


def test_a_constraint_value_of_the_wrong_kind_leaves_the_job_pending():
    from hpo.search import Hyperband
    searcher = Hyperband(SPACE, seed=0, constraints=["params <= 10"], **BUDGETS)
    job = searcher.ask()
    with pytest.raises(TypeError):
        searcher.tell(job, TrialResult(0.5, metrics={"params": "3"}))
    assert searcher.pending == {job.trial_id: job} and not searcher.history and not searcher.points
    searcher.tell(job, TrialResult(0.5, metrics={"params": 3.0}))
    assert searcher.points[job.trial_id][1] == 0
