"""A search for tests that kill it: the real driver (`prepare_study`, the runner, resume by
replay) and the real executors (inline, local worker processes, a Dask LocalCluster), training
a plain-Python trainer whose epochs take milliseconds. No process imports TensorFlow, so a
driver start costs well under a second and a kill test can afford many of them.

Run it as a driver: python -c "from tests.support import kill_search; kill_search.main()"
BACKEND STUDY_DIR (with the repository root on PYTHONPATH). It exits 0 once the search has run all its trials.
BACKEND `inline-mo` is the inline search with two objectives (`val_loss` against `cost`)
and a constraint, whose Pareto front a kill must not change.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hpo.jobs import EpochDone, EpochReport, TrialDone

EPOCH_SECONDS = 0.01
MAX_TRIALS = 300       # long enough that no kill point finds the search over, on an idle machine too
SPACE = {"x": {"type": "float", "low": -2.0, "high": 2.0},
         "shape": {"type": "choice", "values": ["wide", "deep", "flat"]}}


def loss(config, epoch: int) -> float:
    """What the trainer reports: known in advance from the config and the epoch, so a value
    that changed or moved between trials would show."""
    return (config["x"] - 0.5) ** 2 + {"wide": 0.0, "deep": 0.1, "flat": 0.3}[config["shape"]] + 1.0 / epoch


def cost(config) -> float:
    """The second objective: it pulls `x` and `shape` away from what `loss` likes, so the
    front has many members."""
    return (config["x"] + 1.0) ** 2 + {"wide": 0.5, "deep": 0.2, "flat": 0.0}[config["shape"]]


COST_BOUND = 4.0             # the constraint: x above 1 with a wide shape breaks it


class _NoCompileChoices:
    def learn(self, key, mode, detail) -> None:
        pass


class EpochTrainer:
    """The `Trainer` protocol (`run_group`) without a model: each epoch sleeps EPOCH_SECONDS
    and reports `loss`; a continuation reports from its start epoch on, like a Keras trainer."""

    compile_choices = _NoCompileChoices()
    epoch_seconds = EPOCH_SECONDS

    def metrics(self, task, epoch: int) -> dict[str, float]:
        return {"val_loss": loss(task.config, epoch), "cost": cost(task.config)}

    def run_group(self, tasks):
        for task in tasks:
            for epoch in range(task.start_epoch + 1, task.end_epoch + 1):
                time.sleep(self.epoch_seconds)
                yield EpochDone(EpochReport(trial_id=task.trial_id, epoch=epoch, metrics=self.metrics(task, epoch)))
            yield TrialDone(trial_id=task.trial_id, epochs_trained=task.end_epoch - task.start_epoch)


def make_trainer(experiment, slot, known_compile_choices=None) -> EpochTrainer:
    return EpochTrainer()


class EndsEarlyTrainer(EpochTrainer):
    """Each job trains one slow epoch of the several asked, then ends (as early stopping or a
    callback's stop_training end it): its end arrives without its last epoch."""

    epoch_seconds = 1.5

    def run_group(self, tasks):
        for task in tasks:
            time.sleep(self.epoch_seconds)
            epoch = task.start_epoch + 1
            yield EpochDone(EpochReport(trial_id=task.trial_id, epoch=epoch, metrics=self.metrics(task, epoch)))
            yield TrialDone(trial_id=task.trial_id, epochs_trained=1)


def make_ends_early_trainer(experiment, slot, known_compile_choices=None) -> EndsEarlyTrainer:
    return EndsEarlyTrainer()


def experiment_for(backend: str, study_dir: Path):
    from hpo.config import experiment_from_dict
    goals = {"objective": "val_loss", "direction": "minimize"}
    if backend == "inline-mo":
        backend = "inline"
        goals = {"objectives": ["val_loss", {"name": "cost", "direction": "minimize"}],
                 "constraints": [f"cost <= {COST_BOUND}"]}
    return experiment_from_dict({
        "name": "killed", "seed": 7, "data": {"dataset": "synthetic"}, "space": SPACE,
        "search": {"algorithm": "hyperband", **goals,
                   "min_budget": 1, "max_budget": 9, "eta": 3, "max_trials": MAX_TRIALS},
        # Retries enough for every worker kill a test draws: a killed worker's trial must not
        # fail for having been unlucky twice.
        # Two local workers; one Dask worker, as each resume starts a LocalCluster (its nanny
        # restarts a killed worker).
        "execution": {"backend": backend, "workers": 2 if backend == "local" else 1, "max_retries": 20},
        "output": {"dir": str(study_dir.parent)}}, source="kill_search")


def executor_for(experiment, study_dir: Path):
    from hpo.executors.inline import InlineExecutor
    backend, workers = experiment.execution.backend, experiment.execution.workers
    if backend == "inline":
        return InlineExecutor(lambda: make_trainer(experiment, 0))
    if backend == "local":
        from hpo.executors.local import LocalProcessExecutor
        return LocalProcessExecutor(experiment, study_dir, workers, make_trainer=make_trainer)
    from hpo.executors.dask_cluster import DaskExecutor
    return DaskExecutor(experiment, study_dir, workers, make_trainer=make_trainer)


def main(argv: list[str] | None = None) -> None:
    from hpo.driver.runner import build_runner
    from hpo.study.resume import prepare_study

    backend, study_dir = (argv or sys.argv[1:])[:2]
    study_dir = Path(study_dir)
    experiment = experiment_for(backend, study_dir)
    study = prepare_study(experiment, study_dir)      # the lock, then create or resume
    try:
        summary = build_runner(experiment, study, executor_for(experiment, study_dir)).run()
    finally:
        study.close()
    sys.exit(0 if summary.stopped_because in ("max_trials", "searcher finished") else 1)
