"""What `hpo best`, `hpo export` and the report show of a study with several objectives or
constraints: its goals read back from the stored experiment, the Pareto front (as
`pareto_set`), and each trial's objectives and feasibility.

A study with one objective and no constraint is not `ranked`: the views show its single
objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from hpo.metric_names import model_measures_in
from hpo.search.multiobjective.hypervolume import normalised_hypervolume
from hpo.search.multiobjective.objectives import Goals
from hpo.search.multiobjective.pareto import pareto_mask
from hpo.study import TrialRow
from hpo.trial import TrialResult, TrialState


@dataclass(frozen=True)
class ParetoMember:
    """One trial of the Pareto set: its objectives (and constraints' values) by name."""

    trial_id: int
    config: dict[str, Any]
    budget: float
    objectives: dict[str, float]        # objective name -> value, in the user's direction
    feasible: bool                      # every constraint holds
    metrics: dict[str, float]           # everything the objective returned


def stored_goals(experiment: Mapping[str, Any]) -> Goals:
    """The study's objectives and constraints, from its stored experiment (keys absent in a
    study that lacks them read as none)."""
    search = experiment["search"]
    return Goals.of_search(search.get("objectives"), search["objective"], search["direction"],
                           search.get("constraints"))


def is_ranked(experiment: Mapping[str, Any]) -> bool:
    search = experiment["search"]
    return bool(search.get("objectives") or search.get("constraints"))


def trial_goals(trial: TrialRow, goals: Goals) -> tuple[dict[str, float], bool | None]:
    """A trial's objectives by name (those it reported) and whether it was feasible (None:
    it did not complete with every value)."""
    objectives = {name: trial.metrics[name] for name in goals.names if name in trial.metrics}
    if trial.state != TrialState.COMPLETE:
        return objectives, None
    result = goals.result_of(TrialResult(value=trial.value, metrics=trial.metrics))
    if not result.ok:
        return objectives, None
    return objectives, goals.violation(result) == 0


def measures(trial: TrialRow) -> dict[str, float]:
    """The trial's model measures (`registry.MODEL_MEASURES`), in that order."""
    return {name: trial.metrics[name] for name in model_measures_in(trial.metrics)}


def pareto_record(trials: Sequence[TrialRow], goals: Goals) -> dict[str, Any]:
    """`hpo best --json` for several objectives."""
    return {"objectives": [o.to_dict() for o in goals.objectives],
            "constraints": [str(c) for c in goals.constraints],
            "pareto": [{"trial_id": m.trial_id, "config": m.config, "budget": m.budget,
                        "objectives": m.objectives, "feasible": m.feasible} for m in pareto_set(trials, goals)]}


def current_hypervolume(trials: Sequence[TrialRow], goals: Goals) -> float | None:
    """The normalised hypervolume (hpo.search.multiobjective.hypervolume) of the feasible results at the largest
    budget reached, each objective scaled between its best and worst feasible value among
    `trials` (None: no feasible result yet)."""
    points = []
    for t in trials:
        if t.state != TrialState.COMPLETE:
            continue
        result = goals.result_of(TrialResult(value=t.value, metrics=t.metrics))
        if result.ok and goals.violation(result) == 0:
            points.append((t.budget, goals.losses(result)))
    if not points:
        return None
    import numpy as np
    every = np.array([p for _, p in points])
    top = max(b for b, _ in points)
    return normalised_hypervolume([p for b, p in points if b == top], every.min(axis=0), every.max(axis=0))


def completed_results(trials: Sequence[TrialRow], goals: Goals) -> list[tuple[TrialRow, TrialResult]]:
    """The completed trials that report every objective, each with its result as `goals` reads it."""
    done = []
    for t in trials:
        if t.state != TrialState.COMPLETE:
            continue
        result = goals.result_of(TrialResult(value=t.value, metrics=t.metrics))
        if result.ok:
            done.append((t, result))
    return done


def pareto_set(trials: Sequence[TrialRow], goals: Goals) -> tuple[ParetoMember, ...]:
    """The completed trials at the largest budget any reached that are feasible and not
    dominated there (with none feasible, the least violating), in trial id order."""
    done = completed_results(trials, goals)
    if not done:
        return ()
    top = max(t.budget for t, _ in done)
    done = [(t, r) for t, r in done if t.budget == top]
    violations = [goals.violation(r) for _, r in done]
    mask = pareto_mask([goals.losses(r) for _, r in done], violations)
    members = []
    for (t, r), keep, violation in zip(done, mask, violations):
        if keep:
            values = r.values or (r.value,)
            members.append(ParetoMember(trial_id=t.trial_id, config=dict(t.config), budget=t.budget,
                                        objectives={o.name: v for o, v in zip(goals.objectives, values)},
                                        feasible=violation == 0, metrics=dict(t.metrics)))
    return tuple(members)
