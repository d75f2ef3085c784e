"""How a study's trials rank: `Study.best`'s order (the largest budget reached first, then the
objective, then the trial id), with each configuration once, at its deepest completed rung.
`hpo best`, `hpo status --top`, the report and the tuners' results all read it."""

from __future__ import annotations

from typing import Iterable

from hpo.study.store import TrialRow
from hpo.trial import TrialState


def deepest_per_configuration(trials: Iterable[TrialRow]) -> list[TrialRow]:
    """Each configuration (lineage) once: its completed trial at the largest budget."""
    deepest: dict[int, TrialRow] = {}
    for t in trials:
        if t.state != TrialState.COMPLETE or t.value is None:
            continue
        if t.lineage not in deepest or t.budget > deepest[t.lineage].budget:
            deepest[t.lineage] = t
    return list(deepest.values())


def ranked(trials: Iterable[TrialRow], direction: str) -> list[TrialRow]:
    """Completed trials in `Study.best`'s order: budget (largest first), objective, trial id."""
    sign = -1 if direction == "maximize" else 1
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
    return sorted(done, key=lambda t: (-t.budget, sign * t.value, t.trial_id))


def top_configurations(trials: Iterable[TrialRow], direction: str, limit: int | None = None) -> list[TrialRow]:
    """The best configurations, each once at its deepest rung; the first is `hpo best`'s."""
    return ranked(deepest_per_configuration(trials), direction)[:limit]
