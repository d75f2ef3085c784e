"""One trial in its architecture's program, the epoch loop's group of K = 1, and where a
lost attempt picks up again."""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping

import numpy as np

from hpo.jobs import TrainTask
from hpo.training.best_epoch import best_epoch_path
from hpo.training.callbacks import TrialControl
from hpo.training.checkpoint import checkpoint_epoch, save_arrays
from hpo.training.program import TrainingProgram

log = logging.getLogger("hpo.train")


class SingleTrial:
    """One trial in its architecture's program: the epoch loop's group of K = 1."""

    extra_metrics: Mapping[str, float] = {}
    whole_epoch = False     # the compiled step takes an epoch in calls of steps_per_call steps

    def __init__(self, program: TrainingProgram, task: TrainTask, control: TrialControl | None = None):
        self.program, self.tasks = program, [task]
        self.control = control      # the job's callbacks and early stopping (`hpo.training.callbacks`)

    def reset_metrics(self) -> None:
        self.program.measures.reset()

    def train_steps(self, call) -> np.ndarray:
        (loss,) = self.program.train_steps(call)
        return np.array([float(loss)])

    def evaluate(self, x, y) -> np.ndarray:
        return np.array([float(self.program.evaluate(x, y))])

    def metric_results(self, validation: bool) -> list[dict[str, float]]:
        return [self.program.measures.results(validation)]

    def learning_rates(self) -> list[float]:
        return [self.program.optimizer.learning_rate]

    def save(self, epoch: int, durable: bool, reports) -> None:
        save_arrays(self.tasks[0].checkpoint_out, *self.program.host_state(), epoch, durable,
                    reports[0] if reports else ())

    def save_best(self, trials, epoch: int) -> None:
        save_arrays(best_epoch_path(self.tasks[0].checkpoint_out), *self.program.host_state(), epoch, durable=False)


def resume_point(task: TrainTask) -> TrainTask:
    """A task picks up from its own progress checkpoint when an earlier attempt left one
    (worker killed, driver killed, Dask rescheduling): the epochs before it are not redone.
    A checkpoint at the end epoch is not taken: the job's last report would be missing."""
    reached = checkpoint_epoch(task.checkpoint_out)
    if reached is None or not task.start_epoch < reached < task.end_epoch:
        return task
    log.info("trial %d resumes from its own checkpoint at epoch %d", task.trial_id, reached)
    return dataclasses.replace(task, start_epoch=reached, checkpoint_in=task.checkpoint_out)
