"""Simulated workers for `hpo.optimize`: what would 64 workers buy me on this problem?

    import hpo

    def objective(config, budget):
        value, seconds = look_up(config, budget)     # a table, a surrogate, a cost model
        return {"objective": value, "cost": seconds}

    result = hpo.optimize(objective, space, "asha", min_budget=1, max_budget=27, time_limit=3600,
                          workers=64, simulate=hpo.Simulation(cost="cost"))
    result.simulation.utilisation, result.trials[-1].finished_at     # simulated seconds

The objective runs once per trial, at once; each trial then holds one of `workers`
simulated workers for the seconds it returned under `cost`, and the driver sees it finish
when the simulated clock reaches that point (`hpo.executors.simulated`). The searcher, the
study and `time_limit` are the real ones, reading the simulated clock: the study's
timestamps are simulated seconds since the search began, and `time_limit` is in simulated
seconds. The driver reads the limit when a trial ends: the first trial to finish past it is
recorded, then the trials still running are interrupted, so `simulated_seconds` ends past
`time_limit` by up to one trial. Nothing sleeps, and a simulation with the same seed repeats
exactly.

`resumes=True` says the objective models training resumed from a checkpoint: it returns
the cost from scratch to `budget`, and a promotion is charged only the part beyond its
parent's budget. By default each call costs what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpo.clock import SimulatedClock, SimulationReport

__all__ = ["Simulation", "SimulationReport", "simulated_executor"]


@dataclass(frozen=True)
class Simulation:
    """`cost`: the name, in the objective's returned dict, of the trial's duration in
    seconds. `resumes`: a promotion costs only its epochs beyond its parent's."""

    cost: str = "cost"
    resumes: bool = False

    def __post_init__(self):
        # Checked as it is built: a wrong one would otherwise surface at the first trial.
        if not isinstance(self.cost, str) or not self.cost.strip():
            kind = ValueError if isinstance(self.cost, str) else TypeError
            raise kind(f"hpo.Simulation(cost=...): expected the name of the cost in the objective's returned "
                       f"dict, such as 'cost', got {self.cost!r}")
        if not isinstance(self.resumes, bool):
            raise TypeError(f"hpo.Simulation(resumes=...): expected True or False, got {self.resumes!r}")


def simulated_executor(simulation: Simulation, objective, metric: str, workers: int, study=None):
    """The executor of a simulated search, its clock set on `study` too. A resumed study's
    clock goes on from the last time the study recorded, and with `resumes` its finished
    trials' costs are known, so that a promotion of one is charged only its further epochs."""
    rows = study.trials() if study is not None else []
    stamps = [t for row in rows for t in (row.created_at, row.started_at, row.finished_at) if t is not None]
    clock = SimulatedClock(max(stamps, default=0.0))
    if study is not None:
        study.clock = clock
    # Imported here: the executors package and the runner are heavy for `import hpo`.
    from hpo.driver.runner import epochs_for
    from hpo.executors.simulated import SimulatedExecutor
    from hpo.trial import TrialState

    executor = SimulatedExecutor(objective, metric, workers, clock, cost_key=simulation.cost,
                                 resumes=simulation.resumes)
    by_id = {row.trial_id: row for row in rows}
    for row in rows:
        cost = row.metrics.get(simulation.cost)
        if simulation.resumes and row.state == TrialState.COMPLETE and cost is not None:
            parent = by_id.get(row.continues) if row.continues is not None else None
            start = epochs_for(parent.budget) if parent is not None else 0
            executor.reached(row.config, max(epochs_for(row.budget), start + 1), cost)   # the runner's end epoch
    return executor
