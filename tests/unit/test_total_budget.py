"""`search.total_budget`: the search stops once its trials were given that many epochs, and
Hyperband and BOHB plan their last brackets for it, across a resume too (synthetic objective)."""

import argparse

import pytest

import hpo
from hpo.cli.search_command import _complete_note
from hpo.config import experiment_from_dict
from hpo.driver.completion import CompleteStudy
from hpo.driver.runner import epoch_span
from hpo.errors import ConfigError
from hpo.study import Study
from tests.support.searcher_harness import SPACE, objective

SCHEDULE = {"min_budget": 1, "max_budget": 9, "eta": 3}
TOTAL = 75
# Totals at which the next bracket (budget 1 first) could not finish: a told searcher opens a
# full-budget bracket instead (Hyperband's first iteration over 1..9 asks 69 epochs; BOHB's
# opening climb 54).
GIVES_WAY = {"hyperband": 75, "bohb": 60}


def sequence(trials):
    return [(tuple(sorted(t.config.items())), t.budget, t.continues, t.bracket) for t in trials]


def given(trials, promotions_continue=True):
    """The budget the trials were given, counted here apart from the runner's own count."""
    budgets = {t.trial_id: t.budget for t in trials}
    return sum(t.budget - (budgets[t.continues] if t.continues is not None and promotions_continue else 0.0)
               for t in trials)


def study_events(study_dir):
    study = Study.open(study_dir, read_only=True)
    try:
        return [payload["total_budget"] for kind, _, payload in study.events() if kind == "total_budget"]
    finally:
        study.close()


def test_epoch_span_counts_what_a_promotion_adds():
    assert epoch_span(9, None) == (0, 9)
    assert epoch_span(9, 3) == (3, 9)
    assert epoch_span(2.6, None) == (0, 3)
    assert epoch_span(3, 3) == (3, 4)       # a job trains at least one epoch


@pytest.mark.parametrize("algorithm", ["random", "hyperband", "asha", "bohb", "async_bohb"])
@pytest.mark.parametrize("workers", [1, 3])
def test_the_search_stops_once_its_trials_were_given_the_total(algorithm, workers):
    result = hpo.optimize(objective, SPACE, algorithm, **SCHEDULE, total_budget=TOTAL, seed=1, workers=workers)
    assert result.stopped_because == "total_budget"
    # No job is asked once the total is given, so the last one passes it by less than a job.
    assert TOTAL <= given(result.trials) < TOTAL + SCHEDULE["max_budget"]
    assert given(result.trials[:-1]) < TOTAL


def test_the_total_is_in_the_budget_s_units_and_a_fresh_promotion_pays_in_full():
    fractions = hpo.optimize(objective, SPACE, "hyperband", min_budget=1 / 9, max_budget=1, total_budget=3, seed=1)
    assert 3 <= given(fractions.trials) < 4 and given(fractions.trials[:-1]) < 3
    # BOHB(resumes=False): every budget trains afresh, so a promotion is given its whole budget.
    afresh = hpo.optimize(objective, SPACE, "bohb", **SCHEDULE, total_budget=100, seed=1, options={"resumes": False})
    assert any(t.continues is not None for t in afresh.trials)
    assert 100 <= given(afresh.trials, promotions_continue=False) < 109


@pytest.mark.parametrize("algorithm", ["hyperband", "bohb"])
def test_hyperband_and_bohb_are_told_the_total_and_plan_their_last_brackets(algorithm):
    told = hpo.optimize(objective, SPACE, algorithm, **SCHEDULE, total_budget=GIVES_WAY[algorithm], seed=1).trials
    # An explicit option is the searcher's own: None keeps Hyperband's order.
    untold = hpo.optimize(objective, SPACE, algorithm, **SCHEDULE, total_budget=GIVES_WAY[algorithm], seed=1,
                          options={"total_budget": None}).trials
    last = len(told) - 1
    assert sequence(told[:last]) == sequence(untold[:last])
    assert (told[last].budget, told[last].bracket, told[last].continues) == (9, 0, None)
    assert untold[last].budget == 1


def test_a_study_resumed_with_another_total_replays_what_it_was_told_and_goes_on(tmp_path):
    study_dir, total = tmp_path / "study", GIVES_WAY["bohb"]
    first = hpo.optimize(objective, SPACE, "bohb", **SCHEDULE, total_budget=total, seed=1, study_dir=study_dir)
    # Told the larger total from the start, BOHB asks otherwise where the first run ran out, so
    # a replay that told it the new total at once would refuse the study.
    from_the_start = hpo.optimize(objective, SPACE, "bohb", **SCHEDULE, total_budget=2 * total, seed=1).trials
    assert sequence(from_the_start[:len(first.trials)]) != sequence(first.trials)
    extended = hpo.optimize(objective, SPACE, "bohb", **SCHEDULE, total_budget=2 * total, seed=1,
                            study_dir=study_dir)
    assert extended.stopped_because == "total_budget" and len(extended.trials) > len(first.trials)
    assert 2 * total <= given(extended.trials) < 2 * total + SCHEDULE["max_budget"]
    again = hpo.optimize(objective, SPACE, "bohb", **SCHEDULE, total_budget=2 * total, seed=1, study_dir=study_dir)
    assert again.stopped_because == "total_budget" and len(again.trials) == len(extended.trials)
    # Without a total (max_trials the limit) the searcher is told so, and the replay still holds.
    untold = hpo.optimize(objective, SPACE, "bohb", **SCHEDULE, max_trials=len(extended.trials) + 4, seed=1,
                          study_dir=study_dir)
    assert untold.stopped_because == "max_trials" and len(untold.trials) == len(extended.trials) + 4
    assert study_events(study_dir) == [total, 2 * total, None]


def test_an_explicit_option_wins_over_the_totals_a_study_recorded(tmp_path):
    study_dir, total = tmp_path / "study", GIVES_WAY["hyperband"]
    first = hpo.optimize(objective, SPACE, "hyperband", **SCHEDULE, total_budget=total, seed=1, study_dir=study_dir)
    resumed = hpo.optimize(objective, SPACE, "hyperband", **SCHEDULE, total_budget=3 * total, seed=1,
                           study_dir=study_dir, options={"total_budget": 1000})
    assert study_events(study_dir) == [total, 1000]
    # Planning for 1000, Hyperband opens its brackets in its own order again, new configs at budget 1
    # (told the recorded 75 it would open only full-budget brackets past it).
    assert any(t.budget == 1 and t.continues is None for t in resumed.trials[len(first.trials):])


def experiment(**search):
    return experiment_from_dict({"name": "t", "data": {"dataset": "synthetic"}, "space": SPACE,
                                 "search": {"algorithm": "random", "objective": "objective", **search}},
                                needs_data=False)


def test_max_trials_is_no_limit_beside_a_total_unless_given():
    assert experiment().search.max_trials == 50 and experiment().search.total_budget is None
    assert experiment(total_budget=100).search.max_trials is None
    assert experiment(total_budget=100, max_trials=7).search.max_trials == 7
    with pytest.raises(ConfigError, match=r"search\.total_budget.*at least the largest budget \(27\).*got 20"):
        experiment(total_budget=20)
    with pytest.raises(ConfigError, match=r"search\.total_budget"):
        experiment(total_budget="lots")


def test_a_rerun_of_a_study_that_was_given_its_total_says_how_to_extend_it():
    args = argparse.Namespace(experiment="exp.yaml", study_dir="runs/s")
    note = _complete_note(args, experiment(total_budget=100), CompleteStudy("total_budget", 30, None, 104, 100))
    assert "given 104 epochs, search.total_budget=100" in note
    assert note.endswith("run: hpo search exp.yaml --study-dir runs/s --set search.total_budget=204")
    # A total lowered below what was given: the suggestion still trains more.
    lowered = CompleteStudy("total_budget", 30, None, 63, 30)
    assert _complete_note(args, experiment(total_budget=30), lowered).endswith("=93")
