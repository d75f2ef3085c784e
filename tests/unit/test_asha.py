from hpo.search import ASHA, AsyncHyperband

SPACE = {"x": {"type": "float", "low": 0, "high": 1}}


def first_rung(losses, eta=3):
    """An ASHA searcher whose first len(losses) configs finished their first rung with `losses`."""
    searcher = ASHA(SPACE, min_budget=1, max_budget=9, eta=eta, seed=0)
    jobs = [searcher.ask() for _ in losses]
    for job, loss in zip(jobs, losses):
        searcher.tell(job, loss)
    return searcher, searcher._brackets[0]


def test_promotable_picks_top_fraction_not_yet_promoted():
    searcher, bracket = first_rung([5.0, 1.0, 3.0, 2.0, 4.0, 6.0])
    assert searcher._promotable(bracket, 0) == 1                    # top 2 of 6: ids 1 and 3
    assert searcher.ask().continues == 1
    assert searcher._promotable(bracket, 0) == 3
    assert searcher.ask().continues == 3
    assert searcher._promotable(bracket, 0) is None                 # id 2 is third: not in the top 1/3


def test_a_better_result_arriving_later_is_promoted_first():
    searcher, bracket = first_rung([5.0, 1.0, 3.0, 2.0, 4.0, 6.0])
    assert [searcher.ask().continues for _ in range(2)] == [1, 3]
    late = searcher.ask()                                           # no promotion left: a new config
    assert late.continues is None
    searcher.tell(late, 0.5)                                        # 7 results: the top 2 are ids 6 and 1
    assert searcher._promotable(bracket, 0) == late.trial_id


def test_promotion_needs_eta_finished_configs():
    searcher, bracket = first_rung([1.0, 2.0])
    assert searcher._promotable(bracket, 0) is None
    job = searcher.ask()
    searcher.tell(job, 3.0)
    assert searcher._promotable(bracket, 0) == 0


def test_asha_promotes_as_soon_as_a_config_is_in_the_top_third():
    searcher = ASHA(SPACE, min_budget=1, max_budget=9, eta=3, seed=0)
    jobs = [searcher.ask() for _ in range(3)]
    assert all(j.budget == 1 for j in jobs)
    searcher.tell(jobs[0], 0.9)
    searcher.tell(jobs[1], 0.1)
    assert searcher.ask().budget == 1                               # only two finished: no promotion
    searcher.tell(jobs[2], 0.5)
    promoted = searcher.ask()
    assert promoted.continues == jobs[1].trial_id and promoted.budget == 3 and promoted.rung == 1


def test_asha_never_waits():
    searcher = ASHA(SPACE, min_budget=1, max_budget=27, eta=3, seed=0)
    assert all(searcher.ask() is not None for _ in range(50))      # nothing told, still busy


def test_async_hyperband_shares_budget_equally_between_brackets():
    searcher = AsyncHyperband(SPACE, min_budget=1, max_budget=27, eta=3, seed=0)
    jobs = [searcher.ask() for _ in range(8)]
    # Every bracket starts once (lowest index first on ties), then the cheapest so far goes next:
    # bracket 0 has spent 1 against 3, 9 and 27, so it runs until it reaches 3 and 4.
    assert [j.bracket for j in jobs[:4]] == [0, 1, 2, 3]
    assert [j.budget for j in jobs[:4]] == [1, 3, 9, 27]
    assert [j.bracket for j in jobs[4:]] == [0, 0, 0, 1]   # ties go to the lower index
    # Over a long run, each bracket spends about the same budget (increments for promotions).
    rungs = [1.0, 3.0, 9.0, 27.0]
    spent = [0.0] * 4
    for job in jobs:
        spent[job.bracket] += job.budget
        searcher.tell(job, float(job.trial_id % 7))
    for _ in range(3000):
        job = searcher.ask()
        previous = rungs[rungs.index(job.budget) - 1] if job.continues is not None else 0.0
        spent[job.bracket] += job.budget - previous
        searcher.tell(job, float(job.trial_id % 7))
    assert max(spent) - min(spent) <= 27
    assert min(spent) > 1000
