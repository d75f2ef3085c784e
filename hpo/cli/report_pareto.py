"""`hpo report`'s plots for a study with several objectives: the Pareto front (a scatter of
two objectives, or a pairwise grid for three or more, front members joined and labelled
with their trial ids) and the dominated hypervolume against the epochs spent. matplotlib
only; the front is `hpo best`'s (hpo.study.pareto)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from hpo.search.multiobjective.hypervolume import NORMALISED_REFERENCE, normalised_hypervolume
from hpo.search.multiobjective.objectives import Goals
from hpo.study import TrialRow
from hpo.study.pareto import completed_results, pareto_set, trial_goals
from hpo.trial import TrialState

MAX_LABELLED = 20       # trial ids written beside a front's members, at most


def _usable(trials: Sequence[TrialRow], goals: Goals) -> list[tuple[TrialRow, np.ndarray, bool]]:
    """Completed trials with every objective: (trial, losses, feasible)."""
    return [(t, goals.losses(r), goals.violation(r) == 0) for t, r in completed_results(trials, goals)]


def front_figure(trials: Sequence[TrialRow], goals: Goals):
    """Every completed trial at the front's budget (feasible: dots, infeasible: crosses), the
    front members in red (joined with two objectives) and labelled with their trial ids."""
    import matplotlib.pyplot as plt

    members = pareto_set(trials, goals)
    budget = members[0].budget if members else None
    shown = [t for t in trials if t.state == TrialState.COMPLETE and t.budget == budget]
    names = goals.names
    m = len(names)
    pairs = [(0, 1)] if m == 2 else [(i, j) for i in range(m) for j in range(m) if i != j]
    size = (6, 4.5) if m == 2 else (3.2 * m, 3.2 * m)
    fig, axes = plt.subplots(1 if m == 2 else m, 1 if m == 2 else m, figsize=size, layout="constrained",
                             squeeze=False)
    for i in range(m if m > 2 else 0):
        axes[i][i].text(0.5, 0.5, f"{names[i]}\n({goals.objectives[i].direction})", ha="center", va="center")
        axes[i][i].set_axis_off()
    labelled = _labelled(members, names)      # the same members in every panel
    feasibility = [trial_goals(t, goals)[1] for t in shown]
    feasible = [t for t, ok in zip(shown, feasibility) if ok]
    infeasible = [t for t, ok in zip(shown, feasibility) if ok is False]
    for i, j in pairs:
        ax = axes[0][0] if m == 2 else axes[j][i]
        for group, marker, label in ((feasible, "o", "feasible trial"), (infeasible, "x", "infeasible trial")):
            if group:
                ax.scatter([t.metrics[names[i]] for t in group], [t.metrics[names[j]] for t in group],
                           marker=marker, color="0.6", s=16, label=label)
        ordered = sorted(members, key=lambda mem: mem.objectives[names[i]])
        xs = [mem.objectives[names[i]] for mem in ordered]
        ys = [mem.objectives[names[j]] for mem in ordered]
        # With two objectives the front is a curve; with more, a pair's projection of it is not
        # (members trade off through the others), so there the members are only marked.
        ax.plot(xs, ys, "-o" if m == 2 else "o", color="C3", markersize=5, label="Pareto front")
        for mem, x, y in zip(ordered, xs, ys):
            if mem.trial_id in labelled:
                ax.annotate(str(mem.trial_id), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xlabel(f"{names[i]} ({goals.objectives[i].direction})")
        ax.set_ylabel(f"{names[j]} ({goals.objectives[j].direction})")
        ax.grid(alpha=0.3)
    axes[0][0 if m == 2 else 1].legend(loc="best", fontsize=8)
    title = f"Pareto front at budget {budget:g}" if budget is not None else "no front yet"
    if len(members) > MAX_LABELLED:
        title += f"\n{MAX_LABELLED} of its {len(members):,} members labelled, spread over it"
    fig.suptitle(title)
    return fig


def _labelled(members: Sequence, names: Sequence[str]) -> set[int]:
    """The trial ids written beside a front's members: all of a small front's; of a large one
    (a long search's front holds hundreds, whose labels would merge into one blot),
    MAX_LABELLED spread over it: each objective's two extremes, then, one at a time, the member
    farthest from every one chosen (objectives scaled to [0, 1]), so crowded stretches get no
    more labels than sparse ones."""
    if len(members) <= MAX_LABELLED:
        return {mem.trial_id for mem in members}
    points = np.array([[mem.objectives[name] for name in names] for mem in members], dtype=float)
    span = points.max(axis=0) - points.min(axis=0)
    points = (points - points.min(axis=0)) / np.where(span > 0, span, 1.0)
    chosen = list(dict.fromkeys(int(k) for column in points.T for k in (column.argmin(), column.argmax())))
    nearest = np.min(np.linalg.norm(points[:, None, :] - points[chosen][None, :, :], axis=2), axis=1)
    while len(chosen) < MAX_LABELLED:
        k = int(nearest.argmax())
        chosen.append(k)
        nearest = np.minimum(nearest, np.linalg.norm(points - points[k], axis=1))
    return {members[k].trial_id for k in chosen[:MAX_LABELLED]}


def hypervolume_curve(trials: Sequence[TrialRow], goals: Goals) -> tuple[list[float], list[float]]:
    """(epochs spent, hypervolume) after each completed trial, in finishing order: the
    normalised hypervolume (hpo.search.multiobjective.hypervolume) of the feasible results at the largest budget
    reached so far, with every objective scaled between its best and worst feasible value
    in the whole study (one fixed reference point for the whole curve)."""
    usable = sorted(_usable(trials, goals), key=lambda item: item[0].finished_at or 0)
    feasible = np.array([losses for _, losses, ok in usable if ok])
    if len(feasible) == 0:
        return [], []
    low, high = feasible.min(axis=0), feasible.max(axis=0)
    epochs, volumes, spent, seen = [], [], 0.0, []
    for t, losses, ok in usable:
        spent += t.epochs_trained
        seen.append((t.budget, losses, ok))
        top = max(b for b, _, _ in seen)
        points = [p for b, p, f in seen if f and b == top]
        epochs.append(spent)
        volumes.append(normalised_hypervolume(points, low, high) if points else 0.0)
    return epochs, volumes


def hypervolume_figure(trials: Sequence[TrialRow], goals: Goals):
    import matplotlib.pyplot as plt

    epochs, volumes = hypervolume_curve(trials, goals)
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.step(epochs, volumes, where="post", color="C0")
    ax.set_xlabel("epochs trained (all trials)")
    ax.set_ylabel("dominated hypervolume (normalised)")
    ax.set_ylim(0, NORMALISED_REFERENCE ** len(goals.objectives))
    ax.grid(alpha=0.3)
    return fig
