"""BOHB's multi-fidelity TPE with several objectives or constraints.

The model is `hpo.search.surrogates.tpe`'s (every config once, at its deepest budget; deeper configs
rank first); what changes is the order of the configs within one budget, which decides
l(x) and g(x):

- `split="rank"` (the default; multi-objective TPE, Ozaki et al. 2020): by
  `hpo.search.multiobjective.pareto.constrained_order`: feasible configs by non-dominated rank, ties by
  hypervolume contribution (or crowding distance, `tie_break`), then infeasible ones by
  total constraint violation. A config in the worse half of its budget's results by that
  order ranks after every config in a better half (the TPE's guard, with points).
- `split="parego"` (Knowles 2006): every `ask()` draws a weight vector uniformly from the
  simplex and orders the configs by the augmented Chebyshev scalarisation of their
  objectives (scaled to [0, 1] over the results so far); infeasible configs after every
  feasible one, by violation. The model is refitted at every ask.

`benchmarks/multi_objective.py` compares the two (README, "Several objectives"). `rank` is
the default: with asynchronous BOHB, over 20 seeds, the two are within about one standard
error of each other on every problem there (rank the larger on ZDT1 and the digits MLP,
ParEGO on DTLZ2), both at or above Optuna's multi-objective TPE; and the rank model is
refitted only when a result arrived, where ParEGO refits at every ask. The TPE's
worse-half guard (`rungs="reliable"`) judges points by this order among all results at a
budget; its rung-reliability judgement compares configs by their first objective.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hpo.search.base import config_key, with_room
from hpo.search.multiobjective.objectives import Goals
from hpo.search.multiobjective.pareto import constrained_order
from hpo.search.surrogates.tpe import MultiFidelityTPESampler
from hpo.space import SearchSpace

SPLITS = ("rank", "parego")
PAREGO_RHO = 0.05       # weight of the sum term of the augmented Chebyshev scalarisation
INFEASIBLE = 2.0        # scalarised feasible losses stay below 1 + PAREGO_RHO; infeasible ones start here


class ParetoTPESampler(MultiFidelityTPESampler):
    def __init__(self, space: SearchSpace, *, goals: Goals, split: str = "rank", tie_break: str = "hypervolume",
                 max_good: int | None = None, **options):
        # l(x) uncapped by default: the cap (`tpe.MAX_GOOD`) was measured on one objective only,
        # and a front's good set is what spreads the proposals along the front.
        super().__init__(space, max_good=max_good, **options)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
        self.goals = goals
        self.split = split
        self.tie_break = tie_break
        # config key -> (deepest budget, losses, violation), kept in step with the TPE's rows.
        self._points: dict[str, tuple[float, np.ndarray, float]] = {}
        self._weights: np.ndarray | None = None
        # The same points as arrays by the TPE's row, updated where a point changed: ask()
        # must not rebuild them from the dict.
        self._row_points = np.empty((0, len(goals.objectives)))
        self._row_violations = np.empty(0)
        self._changed: set[str] = set()
        self._orders: dict[float, tuple[np.ndarray, np.ndarray]] = {}   # budget -> (rows there, their ranks)
        # Every point told at each budget (not only the deepest): the worse half of a budget is
        # judged among all its results, as the TPE's median is.
        self._at_budget: dict[float, _BudgetPoints] = {}
        self._worse_rows: dict[float, tuple[int, np.ndarray]] = {}      # budget -> (told, worse half's rows)

    def observe_point(self, config: Mapping[str, Any], budget: float, losses: np.ndarray, violation: float) -> None:
        # The TPE keeps a row only for usable results, at the deepest budget: the same rule here.
        if not np.all(np.isfinite(losses)):
            return
        key = config_key(config)
        at = self._at_budget.get(float(budget))
        if at is None:
            at = self._at_budget[float(budget)] = _BudgetPoints(len(losses))
        at.add(key, losses, violation)
        known = self._points.get(key)
        if known is None or budget >= known[0]:
            self._points[key] = (budget, np.asarray(losses, dtype=float), float(violation))
            self._changed.add(key)

    def propose(self, rng: np.random.Generator, budget: float, pending) -> dict[str, Any]:
        if self.split == "parego":
            # Drawn at every ask, model or not, so the random stream stays the same either way.
            self._weights = rng.dirichlet(np.ones(len(self.goals.objectives)))
            self._model = None
        return super().propose(rng, budget, pending)

    def split_losses(self, budgets: np.ndarray, losses: np.ndarray) -> np.ndarray:
        n = len(budgets)
        self._row_points, self._row_violations = with_room(self._row_points, n), with_room(self._row_violations, n)
        for key in self._changed:
            row = self._rows[key]
            self._row_points[row] = self._points[key][1]
            self._row_violations[row] = self._points[key][2]
        self._changed.clear()
        points, violations = self._row_points[:n], self._row_violations[:n]
        if self.split == "parego":
            return self._scalarised(points, violations)
        scores = np.empty(n)
        for budget in np.unique(budgets):
            members = np.flatnonzero(budgets == budget)
            # A config's point is fixed while it stays at this budget: a budget whose members
            # did not change keeps its order (one tell changes one budget's members).
            cached = self._orders.get(float(budget))
            if cached is None or not np.array_equal(cached[0], members):
                order = constrained_order(points[members], violations[members], self.tie_break)
                ranks = np.empty(len(members))
                ranks[order] = np.arange(len(members), dtype=float)
                cached = self._orders[float(budget)] = (members, ranks)
            scores[members] = cached[1]
        return scores

    def _worse_half(self, budgets: np.ndarray, losses: np.ndarray) -> np.ndarray:
        """The TPE's guard with points: a config is in the worse half of its deepest budget when
        it is past the middle of `constrained_order` over every result there (the TPE compares
        one loss with the budget's median; `losses` here are positions within a budget)."""
        worse = np.zeros(len(budgets), dtype=bool)
        for budget, at in self._at_budget.items():
            cached = self._worse_rows.get(budget)
            if cached is None or cached[0] != at.version:
                n = len(at.keys)
                half = (n + 1) // 2         # only which points are in the better half matters
                order = constrained_order(at.points[:n], at.violations[:n], self.tie_break, half)
                rows = np.array([self._rows.get(at.keys[i], -1) for i in order[half:]], dtype=int)
                cached = self._worse_rows[budget] = (at.version, rows[rows >= 0])
            rows = cached[1][cached[1] < len(budgets)]
            worse[rows[budgets[rows] == budget]] = True
        return worse

    def _scalarised(self, points: np.ndarray, violations: np.ndarray) -> np.ndarray:
        low, high = points.min(axis=0), points.max(axis=0)
        scaled = (points - low) / np.where(high > low, high - low, 1.0)
        weighted = scaled * self._weights[None, :]
        scores = weighted.max(axis=1) + PAREGO_RHO * weighted.sum(axis=1)
        infeasible = violations > 0
        scores[infeasible] = INFEASIBLE + np.minimum(violations[infeasible], 1e12)
        return scores


class _BudgetPoints:
    """The points told at one budget, as growing arrays in the order they came (one per config)."""

    def __init__(self, n_objectives: int):
        self.keys: list[str] = []
        self._slot: dict[str, int] = {}
        self.points = np.empty((64, n_objectives))
        self.violations = np.empty(64)
        self.version = 0

    def add(self, key: str, losses: np.ndarray, violation: float) -> None:
        slot = self._slot.get(key)
        if slot is None:
            slot = self._slot[key] = len(self.keys)
            self.keys.append(key)
            if slot == len(self.violations):
                self.points = np.concatenate([self.points, np.empty_like(self.points)])
                self.violations = np.concatenate([self.violations, np.empty_like(self.violations)])
        self.points[slot] = losses
        self.violations[slot] = violation
        self.version += 1


def make_pareto_model(space: SearchSpace, model: str, options: Mapping[str, Any], goals: Goals,
                      tie_break: str) -> ParetoTPESampler:
    """BOHB's model for several objectives or constraints: only the TPE ranks points."""
    if model != "tpe":
        raise ValueError(f"model {model!r} takes one objective without constraints; with several objectives "
                         "or constraints BOHB's model is 'tpe'")
    return ParetoTPESampler(space, goals=goals, tie_break=tie_break, **options)
