"""`hpo.driver.completion`: which stops mean the study had already run, and the limits that
extend it, as every entry point words them."""

from hpo.config.schema import SearchConfig
from hpo.driver.completion import CompleteStudy, complete_study
from hpo.driver.runner import SearchSummary


def summary(stopped_because, finished_now=0):
    return SearchSummary(trials_finished_now=finished_now, stopped_because=stopped_because, best=None,
                         elapsed_seconds=0.0)


def test_only_a_search_that_trained_nothing_and_stopped_at_a_limit_found_its_study_complete():
    settings = SearchConfig(algorithm="random", max_trials=4)
    for reason in ("max_trials", "total_budget", "searcher finished"):
        assert complete_study(summary(reason), [], settings).stopped_because == reason
    assert complete_study(summary("max_trials", finished_now=1), [], settings) is None
    for reason in ("time_limit", "interrupted", "failures"):
        assert complete_study(summary(reason), [], settings) is None


def test_the_next_limits_run_as_much_again_as_the_study_holds():
    # A study run before with max_trials=10 holds 10 trials where this call asks for 4.
    assert CompleteStudy("max_trials", 10, 4, 0.0, None).next_max_trials == 20
    assert CompleteStudy("max_trials", 4, 4, 0.0, None).next_max_trials == 8
    # Given 104 epochs of a total of 100: the next total passes what was given by a whole total.
    assert CompleteStudy("total_budget", 30, None, 104.0, 100.0).next_total_budget == 204
    assert CompleteStudy("total_budget", 30, None, 63.5, 30.0).next_total_budget == 94
