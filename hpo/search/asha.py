"""Asynchronous successive halving (Li et al., MLSys 2020) and asynchronous Hyperband.

ASHA never waits: whenever a worker is free it promotes a config that is in the top
1/eta of its rung and not yet promoted, looking from the highest rung down, and
otherwise starts a new config at the bottom rung. Async Hyperband runs one ASHA bracket
per Hyperband bracket (each starting at a higher minimum budget). The next job goes to the
bracket that has spent the least budget so far, so every bracket gets the equal share that
synchronous Hyperband gives it. (Taking turns job by job would hand the full-budget bracket,
whose jobs cost eta^s times more, most of the budget: random configs at full cost.)
"""

from __future__ import annotations

import bisect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from hpo.search.base import Searcher
from hpo.search.schedule import rung_budgets
from hpo.trial import Job


@dataclass
class _Record:
    trial_id: int
    config: dict[str, Any]
    loss: float


@dataclass
class _AshaBracket:
    index: int
    budgets: list[float]                                             # rung budgets, bottom first
    finished: list[list[_Record]] = field(default_factory=list)     # per rung
    promoted: list[set[int]] = field(default_factory=list)          # trial ids promoted out of each rung
    rung_of: dict[int, int] = field(default_factory=dict)           # issued trial id -> rung
    spent: float = 0.0                                               # budget issued (increments)
    ranked: dict[int, tuple[int, list[int]]] = field(default_factory=dict)  # rung -> (results, order)
    # One objective: per rung, the usable results as (loss, trial id), all of them and those
    # not promoted yet, each kept sorted as results arrive (a sort of the whole rung per
    # result, and a walk past its promoted top per ask, grew with the search).
    by_loss: list[list[tuple[float, int]]] = field(default_factory=list)
    waiting: list[list[tuple[float, int]]] = field(default_factory=list)
    record_of: dict[int, _Record] = field(default_factory=dict)     # finished trial id -> its record

    def __post_init__(self):
        self.finished = [[] for _ in self.budgets]
        self.promoted = [set() for _ in self.budgets]
        self.by_loss = [[] for _ in self.budgets]
        self.waiting = [[] for _ in self.budgets]


class ASHA(Searcher):
    """ASHA (Li et al., MLSys 2020): every new config starts at the lowest rung, and a worker
    that asks gets the promotion of a config in the top 1/`eta` of its rung where there is
    one, else a new config; nobody waits for a rung to fill. `brackets=1` is ASHA proper;
    more (up to the number of rungs) give asynchronous Hyperband (`AsyncHyperband`).
    `seed`, `direction`, `min_budget`, `max_budget`, `eta`, `objectives`, `constraints` as
    `Searcher`'s; `sampler`: where new configs come from (uniform by default)."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, brackets: int = 1, sampler=None, **goals):
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget,
                         max_budget=max_budget, eta=eta, sampler=sampler, **goals)
        budgets = rung_budgets(self.min_budget, self.max_budget, self.eta)
        whole = isinstance(brackets, numbers.Integral) and not isinstance(brackets, bool)
        if not whole or not 1 <= brackets <= len(budgets):
            raise ValueError(f"brackets must be a whole number between 1 and {len(budgets)} for these budgets, "
                             f"got {brackets!r}")
        self._brackets = [_AshaBracket(index=b, budgets=budgets[b:]) for b in range(brackets)]

    def _next_job(self) -> Job:
        bracket = min(self._brackets, key=lambda b: (b.spent, b.index))
        for rung in range(len(bracket.budgets) - 2, -1, -1):
            trial_id = self._promotable(bracket, rung)
            if trial_id is not None:
                bracket.promoted[rung].add(trial_id)
                if not self.goals.ranked:
                    bracket.waiting[rung].pop(0)
                return self._issue(bracket, rung + 1, bracket.record_of[trial_id].config, continues=trial_id)
        return self._issue(bracket, 0, self._propose(bracket.budgets[0]))

    def _promotable(self, bracket: _AshaBracket, rung: int) -> int | None:
        """The best trial among the top floor(n / eta) of the rung's n results that was not
        promoted yet. One objective: the best waiting one, if its rank (by loss, then trial id:
        `rank_for_promotion`'s order) is inside the top."""
        top = int(len(bracket.finished[rung]) // self.eta)
        if not self.goals.ranked:
            waiting = bracket.waiting[rung]
            if waiting and bisect.bisect_left(bracket.by_loss[rung], waiting[0]) < top:
                return waiting[0][1]
            return None
        return next((t for t in self._ranked(bracket, rung)[:top] if t not in bracket.promoted[rung]), None)

    def _ranked(self, bracket: _AshaBracket, rung: int) -> list[int]:
        """Several objectives: the rung's usable trial ids, best first (a non-dominated sort),
        recomputed only when a result arrived there."""
        records = bracket.finished[rung]
        cached = bracket.ranked.get(rung)
        if cached is None or cached[0] != len(records):
            # `_promotable` looks at the top floor(n / eta) only.
            top = int(len(records) // self.eta)
            cached = (len(records), self.rank_for_promotion({r.trial_id: r.loss for r in records}, top))
            bracket.ranked[rung] = cached
        return cached[1]

    def _issue(self, bracket: _AshaBracket, rung: int, config: dict[str, Any],
               continues: int | None = None) -> Job:
        job = self._new_job(config, bracket.budgets[rung], continues=continues,
                            bracket=bracket.index, rung=rung)
        bracket.rung_of[job.trial_id] = rung
        bracket.spent += bracket.budgets[rung] - (bracket.budgets[rung - 1] if continues is not None else 0.0)
        return job

    def _on_result(self, job: Job, loss: float) -> None:
        bracket = self._brackets[job.bracket]
        rung = bracket.rung_of.pop(job.trial_id)
        record = _Record(job.trial_id, dict(job.config), loss)
        bracket.finished[rung].append(record)
        bracket.record_of[job.trial_id] = record
        if math.isfinite(loss) and not self.goals.ranked:
            bisect.insort(bracket.by_loss[rung], (loss, job.trial_id))
            bisect.insort(bracket.waiting[rung], (loss, job.trial_id))
