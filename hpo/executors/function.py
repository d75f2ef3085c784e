"""Runs a plain Python objective `objective(config, budget) -> float | dict` in-process.

For library use and for tests of the search machinery without TensorFlow. A dict result
must hold the experiment's objective key; a float is taken as the objective itself.
"""

from __future__ import annotations

import traceback
from typing import Any, Callable, Mapping

from hpo.executors.base import EpochDone, Event, SingleSlotExecutor, TrialDone
from hpo.training.task import EpochReport, TrainTask


class FunctionExecutor(SingleSlotExecutor):
    def __init__(self, objective: Callable[[Mapping[str, Any], float], Any], metric: str = "objective"):
        super().__init__()
        self.objective = objective
        self.metric = metric
        self._reported = False

    def submit(self, task: TrainTask) -> None:
        self._claim(task)
        self._reported = False

    def next_event(self) -> Event:
        task = self._task
        assert task is not None, "no trial is running"
        if self._reported:
            self._task = None
            return TrialDone(trial_id=task.trial_id, epochs_trained=task.end_epoch - task.start_epoch)
        budget = task.budget if task.budget is not None else float(task.end_epoch)
        try:
            value = self.objective(dict(task.config), budget)
            metrics = {k: float(v) for k, v in value.items()} if isinstance(value, Mapping) \
                else {self.metric: float(value)}
        except Exception as exc:  # the objective's failure is the trial's, not the search's
            self._task = None
            return TrialDone(trial_id=task.trial_id, epochs_trained=0,
                             error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        self._reported = True
        return EpochDone(EpochReport(trial_id=task.trial_id, epoch=task.end_epoch, metrics=metrics))

    def cancel(self, trial_id: int) -> None:
        if self._task is not None and self._task.trial_id == trial_id:
            self._task = None

    def close(self) -> None:
        self._task = None
