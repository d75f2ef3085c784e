"""Executors run `TrainTask`s and stream `EpochDone` / `TrialDone` events back."""

from __future__ import annotations

from hpo.config import Experiment
from hpo.executors.base import EpochDone, Event, TrialDone
from hpo.executors.inline import InlineExecutor

__all__ = ["EpochDone", "Event", "InlineExecutor", "TrialDone", "make_executor"]


def make_executor(experiment: Experiment, study=None):
    """`study` keeps the trainer's compile-mode measurements (see hpo.training.compile_mode)."""
    if experiment.execution.backend == "inline":
        from hpo.training.setup import trainer_for
        return InlineExecutor(lambda: trainer_for(experiment, slot=0, compile_choices=study))
    if experiment.execution.backend == "local":
        import os

        if study is None:
            raise ValueError("the local backend needs the study: its workers open the study folder themselves")

        from hpo.executors.local import LocalProcessExecutor, default_workers
        from hpo.training.devices import available_devices
        workers = experiment.execution.workers
        if workers == "auto":
            workers = default_workers(available_devices(), os.cpu_count() or 1)
        return LocalProcessExecutor(experiment, study.dir, int(workers))
    raise ValueError(f"unknown execution backend {experiment.execution.backend!r}")
