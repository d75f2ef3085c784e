"""A plain-Python trainer that says where it trains: every epoch's metrics carry the worker
process's id, so a test of an executor sees which worker ran which trial. No TensorFlow."""

from __future__ import annotations

import os

from tests.support.kill_search import EpochTrainer


class WhereTrainer(EpochTrainer):
    """`kill_search`'s millisecond trainer, 20 ms an epoch, reporting its process id."""

    epoch_seconds = 0.02

    def metrics(self, task, epoch: int) -> dict[str, float]:
        return {"val_loss": 1.0 / epoch, "pid": float(os.getpid())}


def make_trainer(experiment, slot, known_compile_choices=None) -> WhereTrainer:
    return WhereTrainer()
