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
        return InlineExecutor(lambda: trainer_for(experiment, slot=0, compile_choices=study),
                              fuse=experiment.training.fuse)
    backend = experiment.execution.backend
    if backend in ("local", "dask"):
        if study is None:
            raise ValueError(f"the {backend} backend needs the study: its workers write into the study folder")
        workers = experiment.execution.workers
        if backend == "dask":
            from hpo.executors.dask_cluster import DaskExecutor
            scheduler = experiment.execution.scheduler
            count = None if workers == "auto" and scheduler else _auto_workers(workers)
            return DaskExecutor(experiment, study.dir, count, scheduler)
        from hpo.executors.local import LocalProcessExecutor
        return LocalProcessExecutor(experiment, study.dir, _auto_workers(workers))
    raise ValueError(f"unknown execution backend {backend!r}")


def _auto_workers(workers: int | str) -> int:
    if workers != "auto":
        return int(workers)
    import os

    from hpo.executors.local import default_workers
    from hpo.training.devices import available_devices
    return default_workers(available_devices(), os.cpu_count() or 1)
