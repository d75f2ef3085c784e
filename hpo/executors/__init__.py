"""Executors run `TrainTask`s and stream events back (the contract is in `hpo.jobs`)."""

from __future__ import annotations

from hpo.config import Experiment
from hpo.executors.inline import InlineExecutor
from hpo.jobs import EpochDone, Event, TrialDone

__all__ = ["EpochDone", "Event", "InlineExecutor", "TrialDone", "make_executor", "trainer_for_experiment"]


def trainer_for_experiment(experiment: Experiment, slot: int = 0, known_compile_choices=None):
    """What an executor hands its jobs to: the experiment's `Trainer` on the slot's device,
    behind fusion when `training.fuse` asks for it."""
    from hpo.fusion import with_fusion
    from hpo.training.setup import trainer_for
    return with_fusion(trainer_for(experiment, slot, known_compile_choices), experiment.training.fuse)


def make_executor(experiment: Experiment, study=None):
    """`study`: the compile-mode decisions made so far come from it (`compile: auto`)."""
    known = study.compile_choices() if study is not None else None
    backend = experiment.execution.backend
    if backend == "inline":
        return InlineExecutor(lambda: trainer_for_experiment(experiment, 0, known),
                              slots=experiment.training.jobs_per_trainer)
    if backend in ("local", "dask"):
        if study is None:
            raise ValueError(f"the {backend} backend needs the study: its workers write into the study folder")
        workers = experiment.execution.workers
        if backend == "dask":
            from hpo.executors.dask_cluster import DaskExecutor
            scheduler = experiment.execution.scheduler
            count = None if workers == "auto" and scheduler else _auto_workers(workers)
            return DaskExecutor(experiment, study.dir, count, scheduler, known)
        from hpo.executors.local import LocalProcessExecutor
        return LocalProcessExecutor(experiment, study.dir, _auto_workers(workers), known)
    raise ValueError(f"unknown execution backend {backend!r}")


def _auto_workers(workers: int | str) -> int:
    if workers != "auto":
        return int(workers)
    import os

    from hpo.executors.local import default_workers
    from hpo.training.devices import available_devices
    return default_workers(available_devices(), os.cpu_count() or 1)
