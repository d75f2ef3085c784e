"""A finished (or running) study read back as Keras Tuner shows results: trials, the best
hyperparameters and models, a summary; and as rows for pandas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from hpo.search.multiobjective.objectives import Goals
from hpo.study import TrialRow
from hpo.study.ranking import top_configurations
from hpo.trial import TrialState
from hpo.tuner.hyperparameters import HyperParameters

# Keras Tuner's trial statuses for ours.
STATUS = {TrialState.COMPLETE: "COMPLETED", TrialState.FAILED: "FAILED", TrialState.RUNNING: "RUNNING"}


def trial_key(trial_id: int) -> str:
    return f"{trial_id:04d}"


class TrialMetrics(dict):
    """A trial's metrics by name (the values of the epoch it is scored by), read also as
    Keras Tuner's `MetricsTracker` is: `get_best_value(name)`, `get_last_value(name)`."""

    def get_best_value(self, name: str) -> float | None:
        return self.get(name)

    def get_last_value(self, name: str) -> float | None:
        """The scored epoch's value too: the study keeps that epoch's metrics for the trial."""
        return self.get(name)


class ObjectiveName(str):
    """The objective's name, as a string and as Keras Tuner's `Objective`: `.name` and
    `.direction` ('min' or 'max')."""

    def __new__(cls, name: str, direction: str):
        objective = super().__new__(cls, name)
        objective.name = str(name)
        objective.direction = "max" if direction == "maximize" else "min"
        return objective

    def __getnewargs__(self) -> tuple[str, str]:      # copy and pickle rebuild it from these
        return self.name, "maximize" if self.direction == "max" else "minimize"


@dataclass(frozen=True)
class Trial:
    """One trial as Keras Tuner shows it: `trial_id`, `hyperparameters`, `score`, `status`,
    `metrics` (the values of the epoch it is scored by: its best under `keep_best_epoch`, else
    its last); and hpo's `budget` (epochs reached) and `continues`
    (the trial whose checkpoint it started from)."""

    trial_id: str
    hyperparameters: HyperParameters
    score: float | None
    status: str
    metrics: dict[str, float]
    budget: float
    continues: str | None
    message: str | None = None

    @property
    def best_step(self) -> int:
        return int(round(self.budget)) - 1


def trial_of(row: TrialRow, fixed: Mapping[str, Any]) -> Trial:
    return Trial(trial_id=trial_key(row.trial_id),
                 hyperparameters=HyperParameters(values={**row.config, **fixed}),
                 score=row.value, status=STATUS.get(row.state, row.state.value.upper()),
                 metrics=TrialMetrics(row.metrics), budget=row.budget,
                 continues=None if row.continues is None else trial_key(row.continues),
                 message=(row.error or "").splitlines()[0] if row.error else None)


@dataclass
class Oracle:
    """What `tuner.oracle` offers: `trials` (trial id -> `Trial`), `get_best_trials(n)`,
    `objective`, `max_trials`."""

    objective: Any
    max_trials: int | None
    direction: str
    rows: list[TrialRow] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def trials(self) -> dict[str, Trial]:
        return {trial_key(r.trial_id): trial_of(r, self.fixed) for r in self.rows}

    def get_best_trials(self, num_trials: int = 1) -> list[Trial]:
        goals = Goals.build(direction=self.direction)      # a tuner's study: one objective, no constraint
        return [trial_of(r, self.fixed) for r in top_configurations(self.rows, goals, num_trials)]


class Results(list):
    """One dict per trial (config keys as `config.<name>`, the scored epoch's metrics as
    `metric.<name>`), in trial order; `to_pandas()` makes the DataFrame."""

    def to_pandas(self):
        import pandas as pd
        return pd.DataFrame(list(self))


def rows_of(trials: Sequence[TrialRow]) -> Results:
    rows = Results()
    for t in trials:
        row = {"trial_id": t.trial_id, "state": t.state.value, "budget": t.budget, "value": t.value,
               "continues": t.continues, "bracket": t.bracket, "rung": t.rung, "duration_s": t.duration,
               "error": (t.error or "").splitlines()[0] if t.error else None}
        row.update({f"config.{k}": v for k, v in t.config.items()})
        row.update({f"metric.{k}": v for k, v in t.metrics.items()})
        rows.append(row)
    return rows


def summary_lines(rows: Sequence[TrialRow], objective: str, direction: str, fixed: Mapping[str, Any],
                  num_trials: int = 10) -> list[str]:
    """`results_summary()`'s text: the best configurations, each at its deepest budget."""
    lines = ["Results summary", f"Objective: {objective} ({direction})",
             f"Trials: {len(rows)} ({sum(r.state == TrialState.COMPLETE for r in rows)} completed)"]
    for row in top_configurations(rows, Goals.build(direction=direction), num_trials):
        lines.append("")
        lines.append(f"Trial {trial_key(row.trial_id)}: {objective} = {row.value:.4f} after {row.budget:g} epochs")
        for name, value in {**row.config, **fixed}.items():
            lines.append(f"  {name}: {value}")
    return lines


def plot(rows: Sequence[TrialRow], objective: str, direction: str, ax=None):
    """The objective of each completed trial by trial id, with the best so far (matplotlib)."""
    import matplotlib.pyplot as plt

    done = [r for r in rows if r.state == TrialState.COMPLETE and r.value is not None]
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    xs = [r.trial_id for r in done]
    ys = [r.value for r in done]
    ax.scatter(xs, ys, c=[r.budget for r in done], cmap="viridis", s=18, label="trial (colour: epochs)")
    best, curve = None, []
    pick = max if direction == "maximize" else min
    for y in ys:
        best = y if best is None else pick(best, y)
        curve.append(best)
    ax.step(xs, curve, where="post", color="black", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel(objective)
    ax.legend(loc="best", fontsize="small")
    return ax
