"""A plain-Python trainer that says where it trains: every epoch's metrics carry the worker
process's id, so a test of an executor sees which worker ran which trial. No TensorFlow."""

from __future__ import annotations

import os
import time

from hpo.jobs import EpochDone, EpochReport, TrialDone

EPOCH_SECONDS = 0.02


class _NoCompileChoices:
    def learn(self, key, mode, detail) -> None:
        pass


class WhereTrainer:
    compile_choices = _NoCompileChoices()

    def run_group(self, tasks):
        for task in tasks:
            for epoch in range(task.start_epoch + 1, task.end_epoch + 1):
                time.sleep(EPOCH_SECONDS)
                yield EpochDone(EpochReport(trial_id=task.trial_id, epoch=epoch,
                                            metrics={"val_loss": 1.0 / epoch, "pid": float(os.getpid())}))
            yield TrialDone(trial_id=task.trial_id, epochs_trained=task.end_epoch - task.start_epoch)


def make_trainer(experiment, slot, known_compile_choices=None) -> WhereTrainer:
    return WhereTrainer()
