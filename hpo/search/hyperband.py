"""Synchronous Hyperband (Li et al., JMLR 2018).

Brackets run in the published order. Inside a bracket, successive halving promotes the
best 1/eta of a rung once the whole rung has finished; a promotion is a new job that
`continues` the promoted trial, so the trainer only trains the budget increment. When
every open bracket waits on running jobs, the next bracket opens (as HpBandSter does),
so extra workers are not left idle; with one worker the order is exactly the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpo.search.base import Searcher
from hpo.search.schedule import Bracket, hyperband_brackets
from hpo.trial import Job


@dataclass
class _BracketRun:
    plan: Bracket
    rung: int = 0
    to_sample: int = 0
    promotions: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (trial id, config)
    issued: dict[int, dict[str, Any]] = field(default_factory=dict)            # current rung's jobs
    losses: dict[int, float] = field(default_factory=dict)                     # current rung's results

    @property
    def rung_complete(self) -> bool:
        return (self.to_sample == 0 and not self.promotions
                and len(self.losses) == len(self.issued))

    @property
    def done(self) -> bool:
        return self.rung == len(self.plan.rungs) - 1 and self.rung_complete


class Hyperband(Searcher):
    """Synchronous Hyperband (Li et al., JMLR 2018): brackets of successive halving from
    `min_budget` to `max_budget`, keeping the best 1/`eta` at each rung. A promotion is a new
    job that `continues` its parent. With one worker the order is exactly the paper's; with
    several, the next bracket opens when every open one waits. `sampler`: where new configs
    come from (uniform by default; BOHB passes its KDE). `objectives`, `constraints`,
    `tie_break`: see `Searcher`; several objectives promote by non-dominated rank.

    `total_budget`: the budget the whole search is expected to spend, in the units of
    `min_budget` and `max_budget`, a promotion charged its increment (`BOHB(resumes=False)`:
    its full budget), counted when a job is asked (with several workers, the promotions
    still to come in brackets already open are not counted). A bracket that could not
    finish within what is left is replaced by the next full-budget bracket: a cut-off
    bracket's configs never reach `max_budget`, a full-budget bracket's each do. None
    (default): Hyperband's order throughout. It plans the brackets and stops nothing
    (`max_trials`, `time_limit` and `search.total_budget` do; the runner passes the last on
    through `plan_total_budget`)."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, sampler=None, total_budget: float | None = None,
                 **goals):
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget,
                         max_budget=max_budget, eta=eta, sampler=sampler, **goals)
        self.brackets = hyperband_brackets(self.min_budget, self.max_budget, self.eta)
        self._open: list[_BracketRun] = []
        self._brackets_started = 0
        self.total_budget: float | None = None
        self.plan_total_budget(total_budget)
        self.budget_spent = 0.0                  # asked so far, each job charged as `charge` says
        self._budget_of: dict[int, float] = {}   # trial id -> its job's budget, for the increments

    plans_total_budget = True

    def plan_total_budget(self, total_budget: float | None) -> None:
        """Plan the brackets still to open for `total_budget` (see the class); the budget already
        asked stays counted, so a search told a larger total mid-way plans for what is left."""
        if total_budget is not None and (isinstance(total_budget, bool) or not isinstance(total_budget, (int, float))
                                         or not total_budget > 0):
            raise ValueError(f"total_budget must be a number > 0 or None, got {total_budget!r}")
        self.total_budget = None if total_budget is None else float(total_budget)

    def _plan_at(self, position: int) -> Bracket:
        """The bracket at `position` in the sequence of brackets started: Hyperband's order."""
        return self.brackets[position % len(self.brackets)]

    def _plan_cost(self, plan: Bracket) -> float:
        budgets = [rung.budget for rung in plan.rungs]
        return sum(rung.n_configs * self.charge(rung.budget, parent)
                   for rung, parent in zip(plan.rungs, [None, *budgets]))

    def _new_job(self, config, budget: float, **where) -> Job:
        job = super()._new_job(config, budget, **where)
        self.budget_spent += self.charge(job.budget, self._budget_of.get(job.continues))
        self._budget_of[job.trial_id] = job.budget
        return job

    def _start_bracket(self) -> _BracketRun:
        if self.total_budget is not None:
            plan = self._plan_at(self._brackets_started)
            if plan.s > 0 and self.budget_spent + self._plan_cost(plan) > self.total_budget:
                # The next full-budget bracket (within the next iteration and a half).
                for _ in range(2 * len(self.brackets)):
                    if self._plan_at(self._brackets_started).s == 0:
                        break
                    self._brackets_started += 1
        plan = self._plan_at(self._brackets_started)
        self._brackets_started += 1
        run = _BracketRun(plan=plan, to_sample=plan.rungs[0].n_configs)
        self._open.append(run)
        return run

    def _next_job(self) -> Job | None:
        for run in self._open:
            job = self._job_from(run)
            if job is not None:
                return job
        if self._filling:       # a new bracket is for an idle worker, not for a busy one's fused group
            return None
        return self._job_from(self._start_bracket())

    def _job_from(self, run: _BracketRun) -> Job | None:
        rung = run.plan.rungs[run.rung]
        if run.to_sample > 0:
            run.to_sample -= 1
            job = self._new_job(self._propose(rung.budget), rung.budget, bracket=run.plan.s, rung=run.rung)
        elif run.promotions:
            parent_id, config = run.promotions.pop(0)
            job = self._new_job(config, rung.budget, continues=parent_id, bracket=run.plan.s, rung=run.rung)
        else:
            return None
        run.issued[job.trial_id] = dict(job.config)
        return job

    def _on_result(self, job: Job, loss: float) -> None:
        run = next((r for r in self._open if job.trial_id in r.issued), None)
        if run is None:
            return
        run.losses[job.trial_id] = loss
        if run.done:
            self._open.remove(run)
        elif run.rung_complete:
            self._promote(run)

    def _promote(self, run: _BracketRun) -> None:
        next_rung = run.rung + 1
        keep = run.plan.rungs[next_rung].n_configs
        ranked = self.rank_for_promotion(run.losses)
        run.promotions = [(trial_id, run.issued[trial_id]) for trial_id in ranked[:keep]]
        run.rung, run.issued, run.losses = next_rung, {}, {}
        if not run.promotions:  # every config of the rung failed: nothing left to grow
            self._open.remove(run)
