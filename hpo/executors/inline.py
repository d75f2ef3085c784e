"""Runs one trial at a time in the driver's own process: for tests and debugging.

The trainer is a generator, so "running" a trial here means pulling its next epoch;
the runner sees the same event stream a process pool would send.
"""

from __future__ import annotations

import traceback
from typing import Callable, Iterator

from hpo.executors.base import EpochDone, Event, SingleSlotExecutor, TrialDone
from hpo.training.task import EpochReport, TrainTask


class InlineExecutor(SingleSlotExecutor):
    def __init__(self, make_trainer: Callable[[], object]):
        super().__init__()
        self._make_trainer = make_trainer
        self._trainer = None
        self._epochs: Iterator[EpochReport] | None = None
        self._trained = 0

    def submit(self, task: TrainTask) -> None:
        self._claim(task)
        if self._trainer is None:
            self._trainer = self._make_trainer()
        self._epochs, self._trained = self._trainer.run(task), 0

    def next_event(self) -> Event:
        assert self._task is not None and self._epochs is not None, "no trial is running"
        try:
            report = next(self._epochs)
        except StopIteration:
            return self._finish(None, None)
        except Exception as exc:  # a failed trial is data for the study, not a crash
            return self._finish(f"{type(exc).__name__}: {exc}", traceback.format_exc())
        self._trained += 1
        return EpochDone(report)

    def cancel(self, trial_id: int) -> None:
        if self._task is not None and self._task.trial_id == trial_id:
            self._epochs.close()
            self._task = self._epochs = None

    def close(self) -> None:
        for trial_id in self.running():
            self.cancel(trial_id)

    def _finish(self, error: str | None, trace: str | None) -> TrialDone:
        done = TrialDone(trial_id=self._task.trial_id, epochs_trained=self._trained, error=error, traceback=trace)
        self._task = self._epochs = None
        return done
