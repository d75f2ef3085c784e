"""The freeze-thaw searcher and its learning-curve model (hpo.search.freeze_thaw, learning_curves)."""

import math

import numpy as np
import pytest

import hpo
from hpo.errors import ConfigError
from hpo.search import SEARCHERS, FreezeThaw, make_searcher, rung_budgets
from hpo.search.base import config_key
from hpo.search.freeze_thaw import HAND_OVER, step_budgets
from hpo.search.surrogates.config_gp import ConfigGP
from hpo.search.surrogates.kde import dimensions_of
from hpo.search.surrogates.learning_curves import Calibration, expected_improvement, extrapolate, fit_power_law
from hpo.space import SearchSpace
from hpo.trial import TrialResult
from tests.support.searcher_harness import SPACE, drive, objective, signature

SMALL = {"x": {"type": "float", "low": 0.0, "high": 1.0}, "y": {"type": "float", "low": 0.0, "high": 1.0}}
# Steps 4, 8, 16, 32, 64: the first job already has a curve of four epochs.
BUDGETS = dict(min_budget=4, max_budget=64, growth=2.0)


def told(job, curve_of, start=0.0, direction="minimize"):
    """A TrialResult with the curve over the job's epochs (those after `start`, the budget
    of the trial it continues), as the runner reports it."""
    values = [curve_of(b) for b in range(int(start) + 1, int(job.budget) + 1)]
    if direction == "maximize":
        values = [-v for v in values]
    return TrialResult(value=values[-1], curve=tuple(values))


def power_law(a, c, alpha):
    return lambda b: a + c * b ** -alpha


class Driver:
    """Asks and tells one job at a time, remembering each lineage's curve function and budget."""

    def __init__(self, searcher, direction="minimize"):
        self.searcher, self.direction = searcher, direction
        self.curve_of, self.budget_of = {}, {}

    def ask(self):
        job = self.searcher.ask()
        if job.continues is not None:
            self.curve_of[job.trial_id] = self.curve_of[job.continues]
        self.budget_of[job.trial_id] = job.budget
        return job

    def result(self, job, curve=None):
        if curve is not None:
            self.curve_of[job.trial_id] = curve
        start = 0.0 if job.continues is None else self.budget_of[job.continues]
        return told(job, self.curve_of[job.trial_id], start, self.direction)

    def tell(self, job, curve=None):
        self.searcher.tell(job, self.result(job, curve))


# --- the curve model --------------------------------------------------------------------------

def test_power_law_fit_recovers_known_parameters_from_noisy_samples():
    rng = np.random.default_rng(0)
    budgets = np.arange(1, 51, dtype=float)
    values = 0.2 + 0.8 * budgets ** -0.5 + rng.normal(0, 0.005, len(budgets))
    law = fit_power_law(budgets, values)
    assert law.a == pytest.approx(0.2, abs=0.03)
    assert law.c == pytest.approx(0.8, abs=0.05)
    assert law.alpha == pytest.approx(0.5, abs=0.06)


def test_extrapolation_lands_near_the_true_final_value_with_an_honest_spread():
    rng = np.random.default_rng(1)
    truth = power_law(0.3, 1.2, 0.7)
    budgets = np.arange(1, 17, dtype=float)
    values = truth(budgets) + rng.normal(0, 0.003, len(budgets))
    predicted = extrapolate(budgets, values, 64.0)
    assert abs(predicted.mean - truth(64.0)) < 0.03
    assert 0 < predicted.std < 0.05
    assert abs(predicted.mean - truth(64.0)) < 4 * predicted.std + 0.01


def test_extrapolation_of_one_point_is_the_point_and_of_two_spreads_over_the_exponents():
    assert extrapolate([1.0], [0.7], 27.0).mean == 0.7
    two = extrapolate([1.0, 2.0], [1.0, 0.8], 27.0)
    assert two.mean < 0.8 and two.std > 0


def test_calibration_learns_how_much_of_the_promised_improvement_comes_true():
    calibration = Calibration([1.0, 3.0, 9.0, 27.0])
    assert calibration.trust()[0] == pytest.approx(0.5)          # the prior, before any curve went on
    prior_std = calibration.std(scale=0.2)
    assert prior_std[0] == pytest.approx(0.2) and prior_std[-1] == 0.0
    for promised in np.linspace(-0.5, -0.1, 20):                  # a quarter came true, give or take 0.01
        calibration.add(0, promised, 0.25 * promised + 0.01 * np.sign(np.sin(100 * promised)))
    assert calibration.trust()[0] == pytest.approx(0.25, abs=0.03)
    assert calibration.std(scale=0.2)[0] < 0.1 and calibration.trust()[1] == pytest.approx(0.5)


def test_expected_improvement_is_zero_without_uncertainty_above_the_incumbent():
    gains = expected_improvement(np.array([1.0, 0.5, 1.0]), np.array([0.0, 0.0, 0.5]), 0.8)
    assert gains[0] == 0.0 and gains[1] == pytest.approx(0.3) and gains[2] > 0


def test_steps_grow_geometrically_in_whole_epochs_to_the_full_budget():
    assert step_budgets(1, 27, 2.0) == [1.0, 2.0, 4.0, 7.0, 14.0, 27.0]
    assert step_budgets(1, 52, 2.0) == [1.0, 2.0, 4.0, 7.0, 14.0, 27.0, 52.0]
    assert step_budgets(4, 64, 2.0) == [4.0, 8.0, 16.0, 32.0, 64.0]
    assert step_budgets(5, 5, 2.0) == [5.0]
    assert step_budgets(52 / 27, 52, 2.0) == [2.0, 4.0, 7.0, 14.0, 27.0, 52.0]     # LCBench's range in whole epochs
    assert step_budgets(0.5, 8, 2.0) == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert FreezeThaw(SMALL, min_budget=52 / 27, max_budget=52, eta=3).steps == [2.0, 6.0, 17.0, 52.0]   # growth: eta


# --- decisions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_continues_the_fast_improving_trial_rather_than_the_plateaued_one(direction):
    searcher = FreezeThaw(SMALL, seed=0, n_startup=2, climbers=0, probes=0, direction=direction, **BUDGETS)
    driver = Driver(searcher, direction)
    improving, plateaued = driver.ask(), driver.ask()
    # After four epochs the plateaued curve is lower, but the improving one extrapolates far below it.
    driver.tell(improving, power_law(0.2, 2.0, 1.0))            # 2.2, 1.2, 0.87, 0.7 -> 0.23 at 64
    driver.tell(plateaued, power_law(0.6, 0.06, 2.0))            # 0.66, 0.615, 0.607, 0.604 -> 0.6
    job = driver.ask()
    assert job.continues == improving.trial_id
    assert job.budget == 8.0


def test_starts_new_configs_once_every_paused_trial_extrapolates_worse_than_the_incumbent():
    driver = Driver(FreezeThaw(SMALL, seed=0, n_startup=3, probes=0, **BUDGETS))
    good, bad, worse = driver.ask(), driver.ask(), driver.ask()
    driver.tell(good, power_law(0.1, 0.8, 0.8))
    driver.tell(bad, power_law(0.9, 0.1, 1.5))
    driver.tell(worse, power_law(1.0, 0.1, 1.5))
    lineage = {good.trial_id}
    job = driver.ask()
    while job.continues is not None:        # the good trial climbs to the full budget first
        assert job.continues in lineage
        lineage.add(job.trial_id)
        driver.tell(job)
        job = driver.ask()
    best_job, best = driver.searcher.best
    assert best_job.budget == 64 and best.value == pytest.approx(0.1 + 0.8 / 64 ** 0.8)
    # Both paused trials extrapolate to ~0.9 against an incumbent of ~0.13: new configs run.
    new = [job]
    for _ in range(5):
        driver.tell(new[-1], power_law(0.95, 0.1, 1.5))
        new.append(driver.ask())
    assert all(j.continues not in (bad.trial_id, worse.trial_id) for j in new)
    assert sum(j.continues is None for j in new) >= 5


def test_curveless_tells_still_drive_continuations_from_the_step_values():
    searcher = FreezeThaw(SPACE, seed=0, min_budget=1, max_budget=27)
    log = drive(searcher, 150)       # floats only: the harness's objective, y = f(x) + 3 / budget
    continued = [j for j, _ in log if j.continues is not None]
    assert continued and any(j.budget == 27 for j in continued)
    assert sum(j.continues is None for j, _ in log) > 15
    best_job, best = searcher.best
    assert best_job.budget == 27
    # The best found beats the median of the configs it started: the search is not blind.
    started = [objective(j.config, 27) for j, _ in log if j.continues is None]
    assert best.value < np.median(started)


def test_plain_floats_and_curves_agree_when_the_curve_has_one_epoch():
    """Told a float or a one-epoch curve at budget 1, the searcher's state is the same."""
    space = SMALL
    a, b = FreezeThaw(space, seed=3, min_budget=1, max_budget=1), FreezeThaw(space, seed=3, min_budget=1, max_budget=1)
    for _ in range(15):
        ja, jb = a.ask(), b.ask()
        assert ja == jb
        value = ja.config["x"] + ja.config["y"]
        a.tell(ja, value)
        b.tell(jb, TrialResult(value=value, curve=(value,)))


def run_through_the_study_format(make_searcher, steps, curve_of, events=None):
    """`steps` jobs of a new searcher, each result told as the study stores and replays it
    (`TrialResult.to_dict` and back); with `events` (an earlier run's), each (job, result)
    must equal that run's at the same step."""
    searcher = make_searcher()
    driver, out = Driver(searcher), []
    for step in range(steps):
        job = driver.ask()
        curve = (lambda e, c=job.config: curve_of(c, e)) if job.continues is None else None
        result = TrialResult.from_dict(driver.result(job, curve).to_dict())
        searcher.tell(job, result)
        out.append((job, result))
        if events is not None:
            assert (job, result) == events[step]
    return out


def test_replay_with_curves_rebuilds_identical_asks():
    def run(events=None):
        return run_through_the_study_format(lambda: FreezeThaw(SPACE, seed=5, min_budget=1, max_budget=27), 80,
                                            lambda c, e: objective(c, e) + 0.01 * math.sin(e), events)
    events = run()
    assert any(j.continues is not None for j, _ in events)
    run(events)


def test_replayed_curves_survive_the_study_format():
    result = TrialResult(value=0.3, curve=(0.5, 0.4, 0.3))
    assert TrialResult.from_dict(result.to_dict()) == result
    assert "curve" not in TrialResult(value=0.3).to_dict()       # old studies read and write the same
    assert TrialResult.from_dict({"value": 0.3, "state": "complete"}).curve == ()


def test_parallel_workers_continue_each_checkpoint_at_most_once():
    log = drive(FreezeThaw(SPACE, seed=2, min_budget=1, max_budget=27), 120, workers=4)
    parents = [j.continues for j, _ in log if j.continues is not None]
    assert len(parents) == len(set(parents))      # each checkpoint is continued at most once


# --- options ----------------------------------------------------------------------------------

def test_registered_under_its_config_name():
    assert SEARCHERS["freeze_thaw"] is FreezeThaw
    searcher = make_searcher("freeze_thaw", SPACE, seed=0, direction="maximize", min_budget=1, max_budget=16,
                             eta=3, options={"growth": 2})
    assert isinstance(searcher, FreezeThaw) and searcher.steps == [1.0, 2.0, 4.0, 8.0, 16.0]


@pytest.mark.parametrize("kwargs, argument", [
    (dict(objectives=["loss", "latency"]), "objectives"),
    (dict(constraints=["n <= 4"]), "constraints"),
    (dict(growth=1.0), "growth"),
    (dict(climbers=-1), "climbers"),
    (dict(probes=-1), "probes"),
    (dict(model="forest"), "model"),
    (dict(hand_over=0), "hand_over"),
])
def test_unsupported_options_are_refused_by_name(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        FreezeThaw(SPACE, seed=0, min_budget=1, max_budget=27, **kwargs)


def test_same_seed_with_curves_is_reproducible():
    def run(seed):
        searcher = FreezeThaw(SPACE, seed=seed, min_budget=1, max_budget=27)
        return signature(drive(searcher, 60, workers=2))
    assert run(4) == run(4) != run(5)


def test_both_models_propose_new_configs_reproducibly_and_a_conditional_space_takes_the_tpe():
    unconditional = {name: spec for name, spec in SPACE.items() if "when" not in spec}

    def run(model, space=unconditional):
        searcher = FreezeThaw(space, seed=3, min_budget=1, max_budget=27, model=model)
        return signature(drive(searcher, 60))
    assert run("gp") == run("gp") != run("tpe")
    assert run("gp", SPACE) == run("tpe", SPACE)


# --- the Gaussian process that proposes new configurations ------------------------------------

def test_the_gaussian_process_proposals_stay_inside_an_unconditional_space():
    unconditional = {name: spec for name, spec in SPACE.items() if "when" not in spec}
    searcher = FreezeThaw(unconditional, seed=0, min_budget=1, max_budget=27)
    for job, _ in drive(searcher, 150):
        assert searcher.space.contains(job.config), job.config


def test_the_configuration_model_expects_most_improvement_near_the_best_lineages():
    rng = np.random.default_rng(0)
    vectors = rng.random((40, 2))
    losses = np.linalg.norm(vectors - 0.8, axis=1)
    model = ConfigGP(vectors, losses, dimensions_of(SearchSpace.from_dict(SMALL)), None)
    near, far = model.expected_improvement(np.array([[0.8, 0.8], [0.1, 0.1]]))
    assert near > 10 * far


def test_new_configs_come_near_the_best_lineage_once_the_model_runs():
    searcher, jobs = run_on(lambda config: (lambda b: abs(config["x"] - 0.9) + abs(config["y"] - 0.2) + 1 / b),
                            asks=80)
    late = [job.config for job in jobs[40:] if job.continues is None]
    assert late and np.median([abs(c["x"] - 0.9) + abs(c["y"] - 0.2) for c in late]) < 0.3


# --- steps whose ranking misleads -------------------------------------------------------------

def reversing(config):
    """Final loss x (small x wins), but over the first epochs (1 - 2x) * 3.6 / b dominates: at
    the first step (4 epochs) large x looks best, from 16 epochs on the order is right."""
    x = config["x"]
    return lambda b: x + (1 - 2 * x) * 3.6 / b


def agreeing(config):
    x = config["x"]
    return lambda b: x + 0.5 * (1 + config["y"]) / b


def run_on(curve_family, asks=60, **options):
    searcher = FreezeThaw(SMALL, seed=0, n_startup=6, **BUDGETS, **options)
    driver, jobs = Driver(searcher), []
    for _ in range(asks):
        job = driver.ask()
        driver.tell(job, curve_family(job.config) if job.continues is None else None)
        jobs.append(job)
    return searcher, jobs


def test_a_first_step_that_reverses_the_ranking_is_not_trusted_and_new_configs_start_later():
    searcher, jobs = run_on(reversing)
    assert searcher.step_agreement[4.0] < 0          # the probes show the first step points the wrong way
    assert searcher.entry_step() > 0
    first_judged = next(i for i, j in enumerate(jobs) if j.continues is None and j.budget == 64.0)
    later_starts = [j.budget for j in jobs[first_judged + 4:] if j.continues is None]
    assert later_starts and min(later_starts) > 4.0
    best_job, _ = searcher.best
    assert best_job.budget == 64.0 and best_job.config["x"] < 0.25      # the side that looked worst early


def test_steps_that_rank_as_the_full_budget_does_stay_trusted():
    searcher, jobs = run_on(agreeing)
    assert searcher.entry_step() == 0
    assert all(rho >= 0.6 for rho in searcher.step_agreement.values())
    assert sum(j.continues is None and j.budget == 64.0 for j in jobs) == searcher.probes


def test_probes_run_straight_to_the_full_budget_after_the_startup_configs():
    searcher, jobs = run_on(agreeing, asks=20, probes=2, climbers=0)
    starts = [j.budget for j in jobs if j.continues is None]
    assert starts[:6] == [4.0] * 6 and starts[6:8] == [64.0, 64.0] and starts[8] != 64.0


def test_told_finals_only_a_step_is_judged_by_the_lineages_that_ran_there():
    """A probe told only its final value has no rank of its own at the steps below; the
    steps are judged by the lineages that climbed through them, so neighbours' ranks (noise
    with a few configs at a step) do not move new configs up to max_budget for good."""
    searcher = FreezeThaw(SPACE, seed=0, min_budget=1, max_budget=27)
    log = drive(searcher, 200)          # floats only; y = f(x) + 3 / budget ranks alike at every budget
    assert searcher.entry_step() == 0
    assert sum(j.continues is None and j.budget == 1 for j, _ in log[40:]) > 10


# --- the hand-over to BOHB --------------------------------------------------------------------

def run_with_curves(searcher, until_spent=None, asks=None):
    """Ask and tell one job at a time with the harness's objective as every epoch's value,
    until the searcher handed out `until_spent` full-budget evaluations (or `asks` jobs)."""
    driver, jobs = Driver(searcher), []
    while (until_spent is None or searcher.spent < until_spent * searcher.max_budget) and \
            (asks is None or len(jobs) < asks):
        job = driver.ask()
        driver.tell(job, (lambda b, c=job.config: objective(c, b)) if job.continues is None else None)
        jobs.append(job)
    return jobs


def test_a_search_of_20_full_budget_evaluations_never_hands_over():
    """Where freeze-thaw leads (20 full-budget evaluations on LCBench) it keeps the search."""
    assert HAND_OVER > 20
    searcher = FreezeThaw(SPACE, seed=0, min_budget=1, max_budget=27)
    jobs = run_with_curves(searcher, until_spent=20)
    assert searcher.successor is None and searcher.stats()["handed_over"] == 0
    assert all(j.bracket is None for j in jobs) and sum(j.continues is not None for j in jobs) > 5
    assert searcher.spent == pytest.approx(sum(j.budget - (searcher.history[j.continues][0].budget
                                                           if j.continues is not None else 0) for j in jobs))


def test_until_the_hand_over_the_jobs_are_those_of_freeze_thaw_alone():
    alone = run_with_curves(FreezeThaw(SPACE, seed=3, min_budget=1, max_budget=27, hand_over=None),
                            until_spent=HAND_OVER)
    assert run_with_curves(FreezeThaw(SPACE, seed=3, min_budget=1, max_budget=27), until_spent=HAND_OVER) == alone


def test_past_hand_over_bohb_schedules_the_rest_knowing_every_result_so_far():
    searcher = FreezeThaw(SPACE, seed=1, min_budget=1, max_budget=27, hand_over=4)
    jobs = run_with_curves(searcher, until_spent=12)
    ours = [j for j in jobs if j.bracket is None]
    theirs = [j for j in jobs if j.bracket is not None]
    assert searcher.successor is not None and ours and theirs
    assert jobs.index(theirs[0]) == len(ours)        # from the hand-over on, every job is BOHB's
    spent_before = sum(j.budget for j in ours if j.continues is None) + \
        sum(j.budget - jobs[j.continues].budget for j in ours if j.continues is not None)
    assert 4 * 27 <= spent_before < 4 * 27 + 27
    # BOHB's model learnt every config freeze-thaw ran, at the rung nearest its step, and
    # proposes none of them again.
    rungs = rung_budgets(1, 27, 3)
    model = searcher.successor.sampler
    assert {config_key(j.config) for j in ours} <= set(model.deepest)
    assert all(model.deepest[config_key(j.config)][0] in rungs for j in ours)
    ran = {config_key(j.config) for j in ours}
    assert not any(config_key(j.config) in ran for j in theirs)
    # A promotion continues one of BOHB's own trials (under our trial ids), of the same config, lower.
    by_id = {j.trial_id: j for j in jobs}
    promoted = [j for j in theirs if j.continues is not None]
    assert promoted
    for job in promoted:
        parent = by_id[job.continues]
        assert parent.bracket is not None and parent.config == job.config and parent.budget < job.budget
    assert {j.budget for j in theirs} <= set(rungs)
    assert searcher.stats()["handed_over"] == 1
    assert searcher.best[0].budget == 27


@pytest.mark.slow
def test_the_hand_over_is_reproducible_with_parallel_workers():
    def run(seed, hand_over=3):
        return signature(drive(FreezeThaw(SPACE, seed=seed, min_budget=1, max_budget=27, hand_over=hand_over),
                               150, workers=3))
    assert run(6) == run(6) != run(7)
    assert run(6) != run(6, hand_over=None)


def test_replay_across_the_hand_over_rebuilds_identical_asks():
    def run(events=None):
        return run_through_the_study_format(
            lambda: FreezeThaw(SPACE, seed=5, min_budget=1, max_budget=27, hand_over=2), 90, objective, events)
    events = run()
    assert any(j.bracket is not None for j, _ in events)
    run(events)


# --- budgets that train from scratch ----------------------------------------------------------

def test_resumes_false_is_refused_with_the_reason():
    """Where each budget trains from scratch (a data fraction) there is no learning curve to
    pause and extrapolate: refused at construction, pointing at BOHB."""
    with pytest.raises(ValueError, match=r"resumes=False.*from scratch.*bohb"):
        FreezeThaw(SPACE, seed=0, min_budget=1, max_budget=27, resumes=False)
    assert FreezeThaw(SPACE, seed=0, min_budget=1, max_budget=27, resumes=True).resumes


def test_resumes_false_through_optimize_is_refused_before_a_study_folder_exists(tmp_path):
    calls = []
    with pytest.raises(ConfigError, match=r"options.*resumes=False.*bohb"):
        hpo.optimize(lambda config, budget: calls.append(budget) or config["x"], SMALL, "freeze_thaw",
                     min_budget=1, max_budget=9, max_trials=5, options={"resumes": False},
                     study_dir=tmp_path / "study")
    assert not (tmp_path / "study").exists() and not calls
