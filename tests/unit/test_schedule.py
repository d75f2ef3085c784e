"""Hyperband's schedule against tables computed by hand from Li et al. (JMLR 2018), Alg. 1."""

from collections import Counter
from pathlib import Path

import pytest

from hpo.search import Hyperband, hyperband_brackets, rung_budgets

# bracket s -> [(configs, budget), ...] per rung
TABLES = {
    (1, 27, 3): {3: [(27, 1), (9, 3), (3, 9), (1, 27)],
                 2: [(12, 3), (4, 9), (1, 27)],
                 1: [(6, 9), (2, 27)],
                 0: [(4, 27)]},
    (1, 81, 3): {4: [(81, 1), (27, 3), (9, 9), (3, 27), (1, 81)],
                 3: [(34, 3), (11, 9), (3, 27), (1, 81)],
                 2: [(15, 9), (5, 27), (1, 81)],
                 1: [(8, 27), (2, 81)],
                 0: [(5, 81)]},
    (1, 100, 3): {4: [(81, 100 / 81), (27, 100 / 27), (9, 100 / 9), (3, 100 / 3), (1, 100)],
                  3: [(34, 100 / 27), (11, 100 / 9), (3, 100 / 3), (1, 100)],
                  2: [(15, 100 / 9), (5, 100 / 3), (1, 100)],
                  1: [(8, 100 / 3), (2, 100)],
                  0: [(5, 100)]},
}


@pytest.mark.parametrize("budgets", list(TABLES))
def test_brackets_match_hand_computed_tables(budgets):
    brackets = hyperband_brackets(*budgets)
    assert [b.s for b in brackets] == sorted(TABLES[budgets], reverse=True)
    for bracket in brackets:
        got = [(r.n_configs, r.budget) for r in bracket.rungs]
        expected = TABLES[budgets][bracket.s]
        assert [n for n, _ in got] == [n for n, _ in expected]
        assert [b for _, b in got] == pytest.approx([b for _, b in expected])


def test_rung_budgets_end_at_max():
    assert rung_budgets(1, 27, 3) == pytest.approx([1, 3, 9, 27])
    assert rung_budgets(1, 100, 3) == pytest.approx([100 / 81, 100 / 27, 100 / 9, 100 / 3, 100])


def run_one_iteration(searcher):
    jobs = []
    while searcher._brackets_started <= len(searcher.brackets):
        job = searcher.ask()
        if searcher._brackets_started > len(searcher.brackets):
            break
        jobs.append(job)
        searcher.tell(job, float(job.config["x"]))
    return jobs


def test_one_iteration_asks_exactly_the_published_jobs():
    searcher = Hyperband({"x": {"type": "float", "low": 0, "high": 1}}, min_budget=1, max_budget=27, eta=3, seed=0)
    jobs = run_one_iteration(searcher)
    assert Counter(j.budget for j in jobs) == {1: 27, 3: 21, 9: 13, 27: 8}


def test_promotions_continue_the_best_of_the_rung():
    searcher = Hyperband({"x": {"type": "float", "low": 0, "high": 1}}, min_budget=1, max_budget=9, eta=3, seed=0)
    first_rung = [searcher.ask() for _ in range(9)]
    assert all(j.budget == 1 and j.continues is None for j in first_rung)
    for job in first_rung:
        searcher.tell(job, job.config["x"])                   # minimise x
    promoted = [searcher.ask() for _ in range(3)]
    best_three = sorted(first_rung, key=lambda j: j.config["x"])[:3]
    assert [p.continues for p in promoted] == [j.trial_id for j in best_three]
    assert all(p.budget == 3 and p.rung == 1 for p in promoted)
    assert [p.config for p in promoted] == [j.config for j in best_three]


def test_synchronous_rung_waits_then_next_bracket_opens():
    searcher = Hyperband({"x": {"type": "float", "low": 0, "high": 1}}, min_budget=1, max_budget=9, eta=3, seed=0)
    first = [searcher.ask() for _ in range(9)]
    # Nine jobs pending at rung 0: the rung cannot promote yet, so the next bracket (s=1) opens.
    extra = searcher.ask()
    assert extra.bracket == 1 and extra.budget == 3 and extra.continues is None
    assert len({j.trial_id for j in first + [extra]}) == 10


def test_failed_configs_are_never_promoted():
    searcher = Hyperband({"x": {"type": "float", "low": 0, "high": 1}}, min_budget=1, max_budget=3, eta=3, seed=0)
    jobs = [searcher.ask() for _ in range(searcher.brackets[0].rungs[0].n_configs)]
    for i, job in enumerate(jobs):
        searcher.tell(job, float("nan") if i != 2 else 0.5)
    promoted = searcher.ask()
    assert promoted.continues == jobs[2].trial_id


@pytest.mark.parametrize("budgets, message", [
    ((0, 27, 3), "0 < min_budget <= max_budget, got min_budget=0"),
    ((1, 0, 3), "0 < min_budget <= max_budget, got min_budget=1 and max_budget=0"),
    ((9, 3, 3), "0 < min_budget <= max_budget"),
    ((1, 27, 1), r"eta > 1 \(the halving rate\), got eta=1"),
    ((1, 27, 0.5), "eta > 1"),
])
def test_a_schedule_that_cannot_run_is_a_value_error_saying_which(budgets, message):
    for schedule in (hyperband_brackets, rung_budgets):
        with pytest.raises(ValueError, match=message):
            schedule(*budgets)


@pytest.mark.parametrize("override, key, message", [
    ("search.max_budget=0", "search.max_budget", "expected max_budget > 0, got 0"),
    ("search.eta=1", "search.eta", "expected eta >= 2 (the halving rate"),
    ("search.max_trials=0", "search.max_trials", "expected max_trials >= 1, got 0"),
])
def test_the_cli_reads_the_same_schedule_check_under_its_yaml_keys(override, key, message):
    """`hpo search` and the Python faces share `check_schedule`; here it names the YAML key,
    where hpo.Tuner names its argument (tests/tuner/test_python_face.py)."""
    from hpo.config import load_experiment
    from hpo.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        load_experiment(Path(__file__).resolve().parents[2] / "experiments" / "smoke.yaml", [override])
    assert f"key '{key}': {message}" in str(caught.value)


def _brackets_in_order(searcher, spend: float) -> tuple[list[int], list]:
    """One worker: ask and tell (loss x) until `spend` budget was charged, each promotion its
    increment; the brackets in the order they opened, and every job asked."""
    budget_of, spent, opened, jobs = {}, 0.0, [], []
    while spent < spend:
        job = searcher.ask()
        jobs.append(job)
        spent += job.budget - budget_of.get(job.continues, 0.0)
        budget_of[job.trial_id] = job.budget
        if job.continues is None and job.rung == 0 and (not opened or opened[-1] != job.bracket
                                                        or jobs[-2].continues is not None):
            opened.append(job.bracket)
        searcher.tell(job, float(job.config["x"]))
    return opened, jobs


def test_a_total_budget_puts_the_full_budget_bracket_where_the_next_could_not_finish():
    # Brackets of (1, 27, 3), each promotion paying its increment: s=3 81, s=2 78, s=1 90,
    # s=0 108; one iteration 357. With 10 left after the second s=3 bracket, Hyperband's s=2
    # (78) would be cut off before any of its configs reached 27: the full-budget bracket runs.
    space = {"x": {"type": "float", "low": 0, "high": 1}}
    total = 357 + 81 + 10
    plain, _ = _brackets_in_order(Hyperband(space, min_budget=1, max_budget=27, eta=3, seed=0), total)
    searcher = Hyperband(space, min_budget=1, max_budget=27, eta=3, seed=0, total_budget=total)
    planned, jobs = _brackets_in_order(searcher, total)
    assert plain == [3, 2, 1, 0, 3, 2]
    assert planned == [3, 2, 1, 0, 3, 0]
    assert searcher.budget_spent == pytest.approx(sum(j.budget for j in jobs) - sum(
        next(p.budget for p in jobs if p.trial_id == j.continues) for j in jobs if j.continues is not None))
    # Until the cut, the same jobs as without a total budget.
    _, plain_jobs = _brackets_in_order(Hyperband(space, min_budget=1, max_budget=27, eta=3, seed=0), 357 + 81)
    assert [(j.config, j.budget) for j in jobs[:len(plain_jobs)]] == [(j.config, j.budget) for j in plain_jobs]


def test_where_nothing_resumes_bohb_charges_each_promotion_its_full_budget():
    from hpo.search import BOHB

    space = {"x": {"type": "float", "low": 0, "high": 1}}
    for resumes in (True, False):
        searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0, resumes=resumes, total_budget=1e6)
        jobs = []
        for _ in range(60):
            job = searcher.ask()
            jobs.append(job)
            searcher.tell(job, float(job.config["x"]) / job.budget)
        by_id = {j.trial_id: j for j in jobs}
        continued = [j for j in jobs if j.continues is not None]
        assert continued, "no promotion in 60 jobs"
        paid = sum(j.budget for j in jobs) - (sum(by_id[j.continues].budget for j in continued) if resumes else 0.0)
        assert searcher.budget_spent == pytest.approx(paid)


@pytest.mark.parametrize("total", [0, -5.0, "540", True])
def test_a_total_budget_that_is_not_a_positive_number_is_refused(total):
    with pytest.raises(ValueError, match="total_budget must be a number > 0"):
        Hyperband({"x": {"type": "float", "low": 0, "high": 1}}, total_budget=total)


def test_search_options_may_name_the_total_budget():
    from hpo.search import option_names

    assert "total_budget" in option_names("hyperband") and "total_budget" in option_names("bohb")
