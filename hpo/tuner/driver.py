"""One search of a `Tuner`: the experiment it stands for, the study, the runner.

Everything is checked before the study folder is touched (`prepare` raises `ValueError`):
the data, the space (`discovery`), the compiled model's optimizer, loss and metrics, the
objective, the callbacks. Then the study is created, resumed (the same experiment) or moved
aside (`overwrite`) by `hpo.study.resume.prepare_study`, and `hpo.driver.runner`'s driver loop runs it
with our trainer (`hpo.tuner.trainer`) on the inline, local or Dask executor: the same
study, event log, checkpoints, promotions and TensorBoard runs as `hpo search`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hpo.driver.console import library_log_file
from hpo.driver.runner import build_keras_runner
from hpo.errors import ConfigError, UserInputError
from hpo.metric_names import infer_direction, objective_names
from hpo.study.integrity import FRESH_ADVICE
from hpo.study.searching import open_for_search
from hpo.tuner.data import LOADER, SearchData
from hpo.tuner.keras_tuner_terms import iteration_jobs
from hpo.tuner.trainer import HypermodelBuilder, TrainerFactory

log = logging.getLogger("hpo.tuner")

# kt's search(**fit_kwargs) that hpo's trainer takes; anything else is refused by name.
FIT_KWARGS = frozenset({"x", "y", "validation_data", "validation_split", "batch_size", "epochs", "callbacks",
                        "verbose"})
# The experiment key each tuner argument fills, so that an error names the argument the user
# wrote (`hpo.config.validation.python_argument_error`), never a YAML key or a CLI flag.
ARGUMENT_KEYS = {"search.algorithm": "algorithm", "search.objective": "objective", "search.direction": "direction",
                 "search.min_budget": "min_epochs", "search.max_budget": "max_epochs", "search.eta": "factor",
                 "search.max_trials": "max_trials", "search.options": "options",
                 "search.max_consecutive_failures": "max_consecutive_failed_trials", "seed": "seed",
                 "execution.workers": "workers", "execution.scheduler": "scheduler",
                 "training.batch_size": "search(batch_size=)", "training.early_stopping": "search(callbacks=)",
                 "training.metrics": "build_model's compile(metrics=)", "training.loss": "build_model's compile(loss=)",
                 "output.dir": "directory", "name": "project_name"}
# `check_schedule`'s fields, as a tuner's arguments name them.
SCHEDULE_ARGUMENTS = {"min_budget": "min_epochs", "max_budget": "max_epochs", "eta": "factor",
                      "max_trials": "max_trials"}


@dataclass(frozen=True)
class SearchSettings:
    """What a `Tuner` was constructed with, in hpo's terms."""

    algorithm: str              # hpo.search's name
    objective: str
    direction: str
    max_epochs: int | None      # None: a one-budget search, whose budget is search(epochs=)
    min_epochs: int
    factor: int
    max_trials: int | None      # jobs (a promotion counts); None: Hyperband iterations
    hyperband_iterations: int
    seed: int
    folder: Path
    overwrite: bool
    workers: int
    scheduler: str | None
    options: dict[str, Any]
    max_consecutive_failed_trials: int = 3
    keep_best_epoch: bool = False    # a trial scored by its best epoch, whose weights it keeps


@dataclass(frozen=True)
class Prepared:
    experiment: Any
    factory: TrainerFactory
    data: SearchData
    input_shape: tuple[int, ...] | None = None     # one example's (`tuner.data.example_shape`)
    # What the search should say about the arguments it was given (an `epochs` it does not
    # use), logged once its study and console are open, so that the user and hpo.log see it.
    notes: tuple[str, ...] = ()


def budgets(max_epochs: int | None, min_epochs: int, epochs: int) -> tuple[int, int]:
    """The search's (min_budget, max_budget) in epochs: both `search(epochs=)` for a
    one-budget search (`max_epochs` None), else the tuner's own, as given: a `min_epochs`
    above `max_epochs` is refused by `check_schedule`, never lowered."""
    if max_epochs is None:
        return epochs, epochs
    return min_epochs, max_epochs


def backend_of(workers: int, scheduler: str | None) -> str:
    """`execution.backend` for a tuner's `workers` and `scheduler`: this process, local worker
    processes, or a Dask cluster."""
    if scheduler is not None:
        return "dask"
    return "local" if workers > 1 else "inline"


def experiment_dict(settings: SearchSettings, space: dict[str, Any], data: SearchData, loss: str,
                    metrics: Sequence[str], batch_size: int, epochs: int, early_stopping: dict | None,
                    execution: Mapping[str, Any] | None = None) -> dict:
    """The experiment a tuner's search runs; `execution`: the training keys the compiled model
    sets (`hpo.tuner.compiled_model.execution_settings`)."""
    min_budget, max_budget = budgets(settings.max_epochs, settings.min_epochs, epochs)
    max_trials = settings.max_trials
    if max_trials is None:
        max_trials = iteration_jobs(settings.algorithm, min_budget, max_budget, settings.factor,
                                    settings.hyperband_iterations, settings.options)
    name = re.sub(r"[^\w.\-]", "-", settings.folder.name) or "tuner"
    backend = backend_of(settings.workers, settings.scheduler)
    raw: dict[str, Any] = {
        "name": name if name not in (".", "..") else "tuner",
        "seed": settings.seed,
        "data": {"dataset": LOADER, "options": {"key": data.key}},
        "model": {"builder": "hpo.tuner:hypermodel"},
        "space": space,
        "search": {"algorithm": settings.algorithm, "objective": settings.objective,
                   "direction": settings.direction, "min_budget": min_budget, "max_budget": max_budget,
                   "eta": settings.factor, "max_trials": max_trials, "options": dict(settings.options),
                   "max_consecutive_failures": settings.max_consecutive_failed_trials},
        "training": {"batch_size": batch_size, "loss": loss, "metrics": list(metrics), "engine": "auto",
                     **dict(execution or {})},
        "execution": {"backend": backend, "workers": max(1, settings.workers)},
        "output": {"dir": str(settings.folder)},
    }
    if settings.scheduler is not None:
        raw["execution"]["scheduler"] = settings.scheduler
    if early_stopping:
        raw["training"]["early_stopping"] = early_stopping
    if settings.keep_best_epoch:
        raw["training"]["keep_best_epoch"] = True
    return raw


def early_stopping_of(callbacks: Sequence[Any], best_epoch_of: str | None = None) -> dict[str, Any] | None:
    """kt's callbacks as hpo's: `EarlyStopping` becomes `training.early_stopping`;
    `TensorBoard` is dropped (every trial already has its TensorBoard run in the study);
    anything else is a ValueError naming it. `best_epoch_of`: the objective whose best epoch
    each trial keeps (`training.keep_best_epoch`), which is what `restore_best_weights` asks
    for when it monitors that objective."""
    import keras

    found = None
    for cb in callbacks or ():
        if isinstance(cb, keras.callbacks.EarlyStopping):
            if cb.restore_best_weights and cb.monitor != best_epoch_of:
                kept = (f"each trial keeps its best epoch of {best_epoch_of!r}, not of {cb.monitor!r}"
                        if best_epoch_of else "this tuner keeps each trial's last epoch (keep_best_epoch=True "
                                              "keeps the objective's best)")
                raise ValueError(f"EarlyStopping(restore_best_weights=True) is not supported here: {kept}")
            if cb.baseline is not None or cb.start_from_epoch:
                raise ValueError("EarlyStopping(baseline, start_from_epoch) is not supported by hpo; monitor, "
                                 "patience, min_delta and restore_best_weights are")
            mode = getattr(cb, "mode", "auto")
            inferred = infer_direction(cb.monitor)
            if mode in ("min", "max") and (mode == "max") != (inferred == "maximize"):
                raise ValueError(f"EarlyStopping(monitor={cb.monitor!r}, mode={mode!r}) is not supported by hpo: its "
                                 f"early stopping reads {cb.monitor!r} as {inferred}d, as Keras Tuner infers it; "
                                 f"leave mode='auto' or monitor a measure that is {mode}imized")
            found = {"monitor": cb.monitor, "patience": int(cb.patience), "min_delta": float(abs(cb.min_delta))}
        elif isinstance(cb, keras.callbacks.TensorBoard):
            log.info("search(callbacks=[TensorBoard]) is not used: each trial's TensorBoard run is in the study's "
                     "tensorboard/ folder (hpo tensorboard STUDY)")
        else:
            raise ValueError(f"callback {type(cb).__name__} is not supported by hpo's tuner; EarlyStopping and "
                             f"TensorBoard are (use hpo search with training.callbacks for others)")
    return found


def run(prepared: Prepared, folder: Path, fresh: bool, on_progress: Callable | None = None):
    """Create, resume or move aside the study and run it; returns the runner's summary."""

    experiment = prepared.experiment
    with contextlib.ExitStack() as stack:
        with in_python_terms_on_refusal():
            study = stack.enter_context(open_for_search(experiment, folder, fresh=fresh, log_file=library_log_file))
        for note in prepared.notes:
            log.info("%s", note)
        runner = build_keras_runner(experiment, study, make_trainer=prepared.factory)
        if on_progress is not None:
            runner.on_progress = on_progress
        try:
            summary = runner.run()
        except ConfigError as exc:
            raise ValueError(in_python_terms(str(exc))) from None
        # Once the search ran (a refused replay leaves the study as it was): what `load_model`
        # builds a model without keras.Input from, in a process that did not search.
        shape = prepared.input_shape
        if shape is not None and study.input_shape() != shape:
            study.record_input_shape(shape)
        return summary


# What the study's own messages (written for `hpo search`) and the data checks (which name the
# loader and split they read: this face's own loader) say, as a tuner's user says it.
_SPLITS_GIVEN = (("train", "training data (x, y)"), ("validation", "validation data"), ("test", "test data"))
_PYTHON_TERMS = (
    *((f"the loader {LOADER!r}, split {split!r}, returned ", f"search's {given} holds ") for split, given in
      _SPLITS_GIVEN),
    *((f"the loader {LOADER!r}, split {split!r},", f"search's {given}") for split, given in _SPLITS_GIVEN),
    (f"the loader {LOADER!r}", "search's data"),
    ("Run with --fresh to start a new study (the old one is kept beside it), or choose another --study-dir.",
     "Pass overwrite=True to start a new study there (the old one is moved aside to <folder>.old-<time>), or "
     "choose another directory= or project_name=."),
    ("choose another with --study-dir or output.dir", "choose another directory= or project_name="),
    ("--study-dir or output.dir", "directory= and project_name="),
    ("--study-dir", "directory= or project_name="),
    (FRESH_ADVICE, "overwrite=True"),
    ("--fresh", "overwrite=True"),
    (", key 'output.dir'", ""),
)


def in_python_terms(message: str) -> str:
    for cli, python in _PYTHON_TERMS:
        message = message.replace(cli, python)
    return message


def check_folder(folder: Path, face: str) -> None:
    """The study folder `directory/project_name` can be a study: refused before anything is
    written, in the tuner's argument names."""
    import os

    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{face}: {folder} (directory/project_name) is a file; expected a study folder: choose "
                         f"another directory= or project_name=")
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{face}: cannot write the study folder {folder} ({existing} is not writable); choose "
                         f"another directory= or project_name=")


@contextlib.contextmanager
def in_python_terms_on_refusal():
    """A study's refusal (damaged, newer schema, locked) as the ValueError a tuner raises, in
    its own argument names rather than the CLI's."""
    try:
        yield
    except UserInputError as exc:
        raise ValueError(in_python_terms(str(exc))) from None


@contextlib.contextmanager
def stored_study(folder: Path):
    """The study in `folder`, read-only, closed after; its refusals in the tuner's terms."""
    from hpo.study import Study

    with in_python_terms_on_refusal():
        study = Study.open(folder, read_only=True)
    try:
        yield study
    finally:
        study.close()


def stored_algorithm(folder: Path) -> str | None:
    """The algorithm of the study in `folder` (opened read-only); None where there is none."""
    from hpo.study import DB_NAME

    if not (folder / DB_NAME).exists():
        return None
    with stored_study(folder) as study:
        return study.experiment().get("search", {}).get("algorithm")


def check_resumable(folder: Path, experiment, face: str) -> None:
    """Refuse to resume a study run with another space, searcher, budgets or data, with the
    differences and what to do in the tuner's terms (`prepare_study` says it for the CLI)."""
    from hpo.study.resume import differences_blocking_resume

    with in_python_terms_on_refusal():
        # Several keys may read as one argument (min and max budget as `epochs`): said once.
        blocking = list(dict.fromkeys(_difference_in_python_terms(line, experiment)
                                      for line in differences_blocking_resume(folder, experiment)))
    if blocking:
        raise ValueError(
            f"{face}: the study in {folder} was run with different settings, so resuming it would mix "
            f"incomparable trials. Differences (stored -> now):\n  " + "\n  ".join(blocking) +
            f"\nPass overwrite=True to start a new study there (the old one is moved aside to "
            f"{folder.name}.old-<time>), or choose another project_name=.")


def _difference_in_python_terms(line: str, experiment) -> str:
    """A difference ('search.max_budget: 2.0 -> 3.0') in the names this face's user gave it:
    the tuner's argument, `search(epochs=)` where the search has one budget, and the data
    by what it is rather than by its fingerprint."""
    key, _, change = line.partition(": ")
    if key.startswith("data."):
        return "the data given to search (x, y, validation_data or validation_split)"
    if key in ("search.min_budget", "search.max_budget") and \
            experiment.search.min_budget == experiment.search.max_budget:
        return f"search(epochs=): {change}"
    return f"{ARGUMENT_KEYS[key]}: {change}" if key in ARGUMENT_KEYS and change else line


def check_objective(objective: str, metrics: Sequence[str]) -> None:
    names = objective_names(tuple(metrics), ())
    if objective not in names:
        raise ValueError(f"objective {objective!r} is not a metric the model logs; expected one of "
                         f"{', '.join(names)} (compile the model with the metric to rank by it)")


def make_builder(build: Callable, names: Sequence[str], tunable: Sequence[str] = ()) -> HypermodelBuilder:
    return HypermodelBuilder(build, names, tunable)


def budgets_are_whole(value: float) -> bool:
    return math.isfinite(value) and value == int(value)
