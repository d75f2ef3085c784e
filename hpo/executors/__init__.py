"""Executors run `TrainTask`s and stream events back (the contract is in `hpo.jobs`).

One per `execution.backend` (`hpo.registry.BACKENDS`): `inline` trains in the driver,
`local` in worker processes on this machine, `dask` on a Dask cluster.
"""

from __future__ import annotations

import os
from typing import Callable

from hpo.config import Experiment
from hpo.executors.dask_cluster import DaskExecutor
from hpo.executors.inline import InlineExecutor
from hpo.executors.local import LocalProcessExecutor, default_workers
from hpo.executors.worker_trainer import trainer_for_experiment
from hpo.jobs import EpochDone, Event, TrialDone
from hpo.registry import BACKENDS

__all__ = ["EpochDone", "Event", "InlineExecutor", "TrialDone", "make_executor", "trainer_for_experiment"]


def _inline(experiment: Experiment, study, known, make_trainer):
    make_trainer = make_trainer or trainer_for_experiment
    return InlineExecutor(lambda: make_trainer(experiment, 0, known), slots=experiment.training.jobs_per_trainer)


def _local(experiment: Experiment, study, known, make_trainer):
    return LocalProcessExecutor(experiment, study.dir, _auto_workers(experiment.execution.workers), known,
                                make_trainer=make_trainer)


def _dask(experiment: Experiment, study, known, make_trainer):
    workers, scheduler = experiment.execution.workers, experiment.execution.scheduler
    count = None if workers == "auto" and scheduler else _auto_workers(workers)
    return DaskExecutor(experiment, study.dir, count, scheduler, known, make_trainer=make_trainer)


_FACTORIES = {"inline": _inline, "local": _local, "dask": _dask}
assert set(_FACTORIES) == set(BACKENDS), "every backend the registry names has an executor"
_NEEDS_STUDY = ("local", "dask")      # their workers write checkpoints and logs into the study folder


def make_executor(experiment: Experiment, study=None, make_trainer: Callable | None = None):
    """`study`: the compile-mode decisions made so far come from it (`compile: auto`).
    `make_trainer(experiment, slot, known_compile_choices)`: what each worker trains with
    (default `trainer_for_experiment`; `hpo.tuner` passes one over the user's build_model,
    which must pickle for the `local` and `dask` backends)."""
    known = study.compile_choices() if study is not None else None
    backend = experiment.execution.backend
    if backend not in _FACTORIES:
        raise ValueError(f"unknown execution backend {backend!r}; expected one of {sorted(BACKENDS)}")
    if backend in _NEEDS_STUDY and study is None:
        raise ValueError(f"the {backend} backend needs the study: its workers write into the study folder")
    return _FACTORIES[backend](experiment, study, known, make_trainer)


def _auto_workers(workers: int | str) -> int:
    if workers != "auto":
        return int(workers)
    from hpo.training.devices import available_devices
    return default_workers(available_devices(), os.cpu_count() or 1)
