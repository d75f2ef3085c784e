"""How a study's trials rank: one order for every reader (`hpo best`, `hpo status --top`, the
search's progress and closing lines, the report, `hpo.optimize`'s result, the tuners').

Feasible trials first: with `search.constraints` a trial that breaks one is infeasible and
ranks after every feasible one, infeasible ones by total violation (Deb's constraint
domination, `Goals.violation`). Then the largest budget reached, then the (first) objective,
then the trial id. Without constraints every trial is feasible, and the order is
`Study.best`'s, which `best_in` asks SQL for. `top_configurations` lists each configuration
once, at its deepest completed rung (with constraints, its deepest feasible one where it has
one), so that its first is `best`'s.
"""

from __future__ import annotations

from typing import Callable, Iterable

from hpo.search.multiobjective.objectives import Goals
from hpo.study.store import Study, TrialRow
from hpo.trial import TrialResult, TrialState


def violation(trial: TrialRow, goals: Goals) -> float:
    """How far a completed trial breaks `goals`' constraints (0: feasible, as every trial is
    without constraints; inf: a value a constraint reads is missing)."""
    if not goals.constraints:
        return 0.0
    return goals.violation(goals.result_of(TrialResult(value=trial.value, metrics=trial.metrics)))


def rank_key(goals: Goals) -> Callable[[TrialRow], tuple]:
    """The sort key of a completed trial: violation, largest budget, objective, trial id."""
    sign = -1 if goals.objectives[0].direction == "maximize" else 1
    return lambda t: (violation(t, goals), -t.budget, sign * t.value, t.trial_id)


def completed(trials: Iterable[TrialRow]) -> list[TrialRow]:
    """The trials that rank: completed with a value."""
    return [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]


def deepest_per_configuration(trials: Iterable[TrialRow], goals: Goals) -> list[TrialRow]:
    """Each configuration (lineage) once: its completed trial at the largest budget, with
    constraints the largest at which it is feasible (where none is, the least violating)."""
    def rung_key(t: TrialRow) -> tuple:
        return violation(t, goals), -t.budget, t.trial_id
    deepest: dict[int, TrialRow] = {}
    for t in completed(trials):
        if t.lineage not in deepest or rung_key(t) < rung_key(deepest[t.lineage]):
            deepest[t.lineage] = t
    return list(deepest.values())


def ranked(trials: Iterable[TrialRow], goals: Goals) -> list[TrialRow]:
    """Completed trials, best first."""
    return sorted(completed(trials), key=rank_key(goals))


def best(trials: Iterable[TrialRow], goals: Goals) -> TrialRow | None:
    """`ranked(trials, goals)[0]` (None: none completed)."""
    return min(completed(trials), key=rank_key(goals), default=None)


def feasible_value(trial: TrialRow | None, goals: Goals) -> float | None:
    """`trial`'s objective where it meets every constraint, else None: the best so far that
    TensorBoard's search run and the report plot, which count feasible trials alone."""
    return trial.value if trial is not None and violation(trial, goals) == 0 else None


def best_in(study: Study, goals: Goals) -> TrialRow | None:
    """The study's best trial; without constraints in SQL (`Study.best`: the same order)."""
    if not goals.constraints:
        return study.best(goals.objectives[0].direction)
    return best(study.trials(), goals)


def top_configurations(trials: Iterable[TrialRow], goals: Goals, limit: int | None = None) -> list[TrialRow]:
    """The best configurations, each once at its deepest rung; the first is `hpo best`'s."""
    return ranked(deepest_per_configuration(trials, goals), goals)[:limit]
