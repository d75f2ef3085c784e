"""Asynchronous Hyperband: every Hyperband bracket as an ASHA bracket (`hpo.search.asha`). The
next job goes to the bracket that has spent the least budget so far, so every bracket gets the
equal share that synchronous Hyperband gives it."""

from __future__ import annotations

from hpo.search.asha import ASHA
from hpo.search.base import check_schedule_kinds
from hpo.search.schedule import rung_budgets


class AsyncHyperband(ASHA):
    """Asynchronous Hyperband: every Hyperband bracket as an ASHA bracket, the next job going
    to the bracket that has spent least. Keyword arguments as `ASHA`'s, without `brackets`."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, sampler=None, **goals):
        check_schedule_kinds(min_budget, max_budget, eta, seed)
        n_brackets = len(rung_budgets(min_budget, max_budget, eta))
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget,
                         max_budget=max_budget, eta=eta, brackets=n_brackets, sampler=sampler, **goals)
