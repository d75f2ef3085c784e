"""What `hpo best`, `hpo export` and the report show of a study with several objectives or
constraints: its goals read back from the stored experiment, the Pareto front (as
`hpo.optimization.pareto_set` finds it), and each trial's objectives and feasibility.

A study with one objective and no constraint (every study made before these keys existed)
is not `ranked`: the views show it exactly as they always have.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from hpo.model_measures import MEASURES
from hpo.search.objectives import Goals, Objective
from hpo.study import TrialRow
from hpo.trial import TrialResult, TrialState


def stored_goals(experiment: Mapping[str, Any]) -> Goals:
    """The study's objectives and constraints, from its stored experiment (keys absent in a
    study made before they existed read as none)."""
    search = experiment["search"]
    objectives = search.get("objectives") or [{"name": search["objective"], "direction": search["direction"]}]
    constraints = list(search.get("constraints") or ())
    return Goals.build([Objective(o["name"], o["direction"]) for o in objectives], constraints)


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
    return {name: trial.metrics[name] for name in MEASURES if name in trial.metrics}


def front(trials: Sequence[TrialRow], goals: Goals):
    from hpo.optimization import pareto_set
    return pareto_set(trials, goals)


def pareto_record(trials: Sequence[TrialRow], goals: Goals) -> dict[str, Any]:
    """`hpo best --json` for several objectives."""
    return {"objectives": [o.to_dict() for o in goals.objectives],
            "constraints": [str(c) for c in goals.constraints],
            "pareto": [{"trial_id": m.trial_id, "config": m.config, "budget": m.budget,
                        "objectives": m.objectives, "feasible": m.feasible} for m in front(trials, goals)]}


def pareto_table(trials: Sequence[TrialRow], goals: Goals, title: str, width: int):
    """One row per front member: trial, budget, its objectives, feasibility, then its config
    (the config column wraps, or moves out where the terminal is too narrow)."""
    from hpo.tables import _table, config_text

    columns = ["trial", "budget", *(f"{o.name} ({o.direction[:3]})" for o in goals.objectives)]
    if goals.constraints:
        columns.append("feasible")
    rows = []
    for m in front(trials, goals):
        row = [str(m.trial_id), f"{m.budget:g}", *(f"{m.objectives[n]:.4g}" for n in goals.names)]
        if goals.constraints:
            row.append("yes" if m.feasible else "no")
        rows.append([*row, config_text(m.config)])
    return _table(title, columns, rows, width, "config")


def current_hypervolume(trials: Sequence[TrialRow], goals: Goals) -> float | None:
    """The normalised hypervolume (hpo.hypervolume) of the feasible results at the largest
    budget reached, each objective scaled between its best and worst feasible value among
    `trials` (None: no feasible result yet)."""
    from hpo.hypervolume import normalised_hypervolume
    from hpo.trial import TrialResult

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
