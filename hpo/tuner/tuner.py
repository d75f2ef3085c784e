"""`hpo.Tuner`: a Keras model builder searched by hpo's engine, from Python or a notebook.

    tuner = hpo.Tuner(build, space={"units": {"type": "choice", "values": [32, 64]},
                                    "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
                      objective="val_accuracy", algorithm="bohb", max_epochs=9, directory="runs",
                      project_name="digits")
    tuner.search(x, y, validation_data=(x_val, y_val), batch_size=32)
    tuner.get_best_models(1)[0], tuner.get_best_hyperparameters(1)[0].values, tuner.results.to_pandas()

`build(config)` returns a compiled `keras.Model`. Without `space`, `build` takes a Keras
Tuner `hp` instead and the space is what it declares (`hpo.tuner.discovery`): that is the
Keras Tuner face, `hpo.keras_tuner`, which is this class under Keras Tuner's argument names.

The tuner's folder `directory/project_name` is an hpo study: `hpo status`, `best`,
`report`, `export` and `tensorboard` read it, running the script again resumes it, and
`overwrite=True` moves it aside (to `<folder>.old-<time>`) first, as `hpo search --fresh`.
`algorithm` names a searcher of `hpo.search.SEARCHERS`; left out, it is the CLI's default for
the backend: `bohb` in this process, `async_bohb` with workers or a scheduler (no worker waits
at a rung), or, where the folder holds a study to resume, that study's algorithm.
`workers=N` trains in N local processes, `scheduler="tcp://..."` on a Dask cluster; the
builder travels to them by value (cloudpickle), the arrays once per worker. The workers
never run the user's script, so a script without a main guard, or a notebook cell, works
with workers as without; a builder that cannot be pickled is refused before the search
(`hpo.tuner.shipping`)."""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from hpo.driver.completion import CompleteStudy, complete_study
from hpo.driver.preflight import check_batch_sizes
from hpo.search import SEARCHERS
from hpo.space import SearchSpace
from hpo.termination import interruption, stops_on_sigterm
from hpo.trial import TrialState, trial_ids_text
from hpo.tuner import driver
from hpo.tuner.compiled_model import (
    UnsupportedModel,
    architecture,
    compile_arguments_recorded,
    execution_settings,
    loss_and_metrics,
    optimizer_params,
)
from hpo.tuner.data import SearchData, example_shape, from_search_arguments, register
from hpo.tuner.discovery import Discovered, discover
from hpo.tuner.hyperparameters import Declared, DeclaredTwice, HyperParameters
from hpo.tuner.results import ObjectiveName, Oracle, Results, plot, rows_of, summary_lines, trial_of
from hpo.tuner.shipping import check_shippable
from hpo.tuner.trainer import NotAModel

log = logging.getLogger("hpo.tuner")

class _ConfigBuild:
    """`build(config)` seen as `build(hp)`: the config is the hp's values (active parameters)."""

    def __init__(self, build: Callable[[dict], Any]):
        self.build = build

    def __call__(self, hp: HyperParameters):
        return self.build(dict(hp.values))


class HyperModel:
    """Keras Tuner's `HyperModel`: subclass it and define `build(hp)`. Overriding `fit` (a
    training loop of your own) is not supported: hpo trains the compiled model itself."""

    def __init__(self, name: str | None = None, tunable: bool = True):
        self.name, self.tunable = name, tunable

    def build(self, hp: HyperParameters):
        raise NotImplementedError("define build(hp) in your HyperModel subclass")

    def fit(self, hp: HyperParameters, model, *args, **kwargs):
        """Keras Tuner's default, `model.fit(*args, **kwargs)`: for training a model by hand
        (the best config again, say); the search trains with hpo's engine."""
        return model.fit(*args, **kwargs)


class Tuner:
    """hpo's native tuner; see the module docstring. Constructing it does no work: the space
    is discovered, and everything checked, when `search` (or `search_space_summary`) runs."""

    one_budget = False      # RandomSearch-like faces train every trial for search(epochs=)

    def __init__(self, build: Callable, space: SearchSpace | Mapping[str, Any] | None = None, *,
                 objective: str = "val_accuracy", direction: str | None = None, algorithm: str | None = None,
                 max_epochs: int | None = 27, min_epochs: int = 1, factor: int = 3, max_trials: int | None = None,
                 hyperband_iterations: int = 1, seed: int = 0, directory: str | Path = ".",
                 project_name: str = "untitled_project", overwrite: bool = False, workers: int = 1,
                 scheduler: str | None = None, options: Mapping[str, Any] | None = None,
                 max_consecutive_failed_trials: int = 3, keep_best_epoch: bool = False):
        from hpo.metric_names import infer_direction

        # Left out: the CLI's default for the backend the workers pick, unless the folder holds
        # a study to resume, whose own algorithm `search` then takes (`_resumed_algorithm`).
        self._algorithm_left_out = algorithm is None
        if algorithm is None:
            from hpo.registry import default_algorithm
            algorithm = default_algorithm(driver.backend_of(workers, scheduler))
        if algorithm not in SEARCHERS:
            from hpo.errors import did_you_mean
            raise ValueError(f"{type(self).__name__}(algorithm={algorithm!r}): expected one of {', '.join(SEARCHERS)}"
                             f"{did_you_mean(algorithm, SEARCHERS)}")
        if direction not in (None, "minimize", "maximize"):
            raise ValueError(f"direction must be 'minimize' or 'maximize', got {direction!r}")
        if not callable(build) and callable(getattr(build, "build", None)):   # a HyperModel
            if any("fit" in vars(k) for k in type(build).__mro__[:-1]
                   if k is not HyperModel and k.__module__.split(".")[0] != "keras_tuner"):
                raise ValueError(f"{type(build).__name__}.fit overrides the training loop, which hpo's tuner "
                                 f"does not support: hpo trains the compiled model itself")
            build = build.build
        if not callable(build):
            raise ValueError(f"expected a function build_model(hp) (or a HyperModel), got {build!r}")
        self.build = build
        self.space = None if space is None else SearchSpace.coerce(space)
        self.objective = objective
        self.direction = direction or infer_direction(objective)
        self.algorithm = algorithm
        self.max_epochs, self.min_epochs, self.factor = max_epochs, min_epochs, factor
        self.max_trials, self.hyperband_iterations = max_trials, hyperband_iterations
        self.seed = seed
        self.directory, self.project_name = Path(directory), project_name
        self.overwrite = overwrite
        self.workers, self.scheduler = workers, scheduler
        self.options = dict(options or {})
        self.max_consecutive_failed_trials = max_consecutive_failed_trials
        self.keep_best_epoch = bool(keep_best_epoch)
        self.discovered_: Discovered | None = None
        self.summary_ = None
        self._moved_aside = False
        self._rows: list = []
        self._training: dict[str, Any] = {}

    # --- the space -----------------------------------------------------------------------------
    @property
    def folder(self) -> Path:
        return self.directory / self.project_name

    @property
    def project_dir(self) -> str:
        """Keras Tuner's name for the folder: here the study's."""
        return str(self.folder)

    def reload(self) -> None:
        """Read the study's trials again (Keras Tuner's `reload`: results another process wrote)."""
        self._reload()

    @property
    def hp_build(self) -> Callable[[HyperParameters], Any]:
        return self.build if self.space is None else _ConfigBuild(self.build)

    def discovered(self) -> Discovered:
        if self.discovered_ is None:
            if self.space is not None:
                self.discovered_ = Discovered(declared={p.name: _declared(p) for p in self.space.params},
                                              when={p.name: dict(p.when) for p in self.space.params})
            else:
                try:
                    self.discovered_ = discover(self.build)
                except DeclaredTwice as exc:
                    raise ValueError(str(exc)) from None
                except Exception as exc:
                    raise ValueError(f"build_model failed on the default hyperparameters: {type(exc).__name__}: "
                                     f"{exc}") from exc
                for failure in self.discovered_.failures:
                    log.info("exploring build_model: the branch %s failed; its trials will fail", failure)
        return self.discovered_

    def space_dict(self) -> dict[str, Any]:
        if self.space is not None:
            return self.space.to_dict()
        return self.discovered().space_dict()

    def search_space_summary(self) -> None:
        """Print the search space, as Keras Tuner's `search_space_summary` does."""
        space = self.space_dict()
        lines = ["Search space summary", f"Default search space size: {len(space)}"]
        for name, body in space.items():
            lines.append(f"{name} ({body['type']})")
            lines.append("{" + ", ".join(f"'{k}': {v!r}" for k, v in body.items() if k != "type") + "}")
        print("\n".join(lines))

    # --- the search ----------------------------------------------------------------------------
    @stops_on_sigterm
    def search(self, x=None, y=None, *, validation_data=None, validation_split: float = 0.0,
               batch_size: int | None = None, epochs: int | None = None, callbacks=None, verbose: int = 1,
               **fit_kwargs) -> None:
        """Run (or resume) the search. The arguments are `model.fit`'s, as Keras Tuner takes them:
        arrays or a batched `tf.data.Dataset`, `validation_data` or `validation_split`,
        `batch_size` (default 32, as `fit`), `epochs` (the budget of a one-budget search;
        Hyperband-like searches train up to `max_epochs`), `callbacks` (EarlyStopping;
        TensorBoard is the study's own). Anything else is a ValueError naming it.

        Every check runs before the study folder is touched, and names this tuner's argument.
        A study that already ran all its trials says so (at `verbose=1`) and how to extend it.
        Ctrl-C marks the running trials interrupted, says in one line how to resume, and
        raises `KeyboardInterrupt`, as Keras Tuner does (SIGTERM marks them too, then ends the
        process: `hpo.termination`); `max_consecutive_failed_trials`
        failures in a row raise a RuntimeError (`hpo.driver.runner.SearchAborted`)."""
        unsupported = sorted(fit_kwargs)
        if unsupported:
            raise ValueError(f"search({unsupported[0]}=...) is a model.fit argument hpo's tuner does not support; "
                             f"supported: {', '.join(sorted(driver.FIT_KWARGS))}")
        self._check_schedule(epochs)
        driver.check_folder(self.folder, self._face)
        if self._algorithm_left_out and not (self.overwrite and not self._moved_aside):
            self.algorithm = driver.stored_algorithm(self.folder) or self.algorithm
        data = from_search_arguments(x, y, validation_data, validation_split, batch_size)
        prepared = self._prepare(data, batch_size, epochs, callbacks)
        fresh = self.overwrite and not self._moved_aside
        if not fresh:
            driver.check_resumable(self.folder, prepared.experiment, self._face)
        from hpo.driver.runner import SearchAborted

        with _console(verbose) as console:
            try:
                self.summary_ = summary = driver.run(prepared, self.folder, fresh=fresh, on_progress=self._progress)
            except SearchAborted as exc:     # Keras Tuner raises a RuntimeError here too
                self._moved_aside = self._moved_aside or fresh
                self._reload()
                raise SearchAborted(f"{exc} (max_consecutive_failed_trials={self.max_consecutive_failed_trials}; "
                                    f"the study in {self.folder} keeps its trials)") from None
            self._moved_aside = self._moved_aside or fresh
            self._reload()
            if summary.stopped_because == "interrupted":
                trials = sorted(console.interrupted) if console is not None else []
                rerun = f"; trial{'s' if len(trials) > 1 else ''} {trial_ids_text(trials)} will run again" \
                    if trials else ""
                log.warning("search interrupted: the study in %s is saved; run search again (or the script) to "
                            "resume it%s", self.folder, rerun)
                raise interruption(summary.by_sigterm)
            complete = complete_study(summary, self._rows, prepared.experiment.search)
            if complete is not None:
                log.info("%s", self._complete_note(prepared.experiment, complete))
            else:
                log.info("search stopped (%s); study in %s", summary.stopped_because, self.folder)
            failed = [t for t in self._rows if t.state == TrialState.FAILED]
            if failed and not any(t.state == TrialState.COMPLETE for t in self._rows):
                log.warning("%s", _none_completed(self._rows, failed, self.folder))

    @property
    def _face(self) -> str:
        return f"{type(self).__name__}()"

    def _check_schedule(self, epochs: int | None) -> None:
        """The budgets, rate and trial count, checked before anything else runs: an impossible
        schedule is a ValueError naming this tuner's argument (`check_schedule`, which the CLI
        runs under the YAML keys)."""
        from hpo.config.validation import check_schedule, python_argument_error
        from hpo.errors import ConfigError

        counts = {"max_epochs": self.max_epochs, "min_epochs": self.min_epochs, "factor": self.factor,
                  "max_trials": self.max_trials, "hyperband_iterations": self.hyperband_iterations,
                  "workers": self.workers, "max_consecutive_failed_trials": self.max_consecutive_failed_trials,
                  "search(epochs=)": epochs}
        for name, value in counts.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{self._face}, argument {name!r}: expected a whole number, got "
                                f"{type(value).__name__} {value!r}")
        for name in ("hyperband_iterations", "workers", "max_consecutive_failed_trials"):
            if counts[name] is None or counts[name] < 1:     # these have no 'none' meaning
                raise ValueError(f"{self._face}, argument {name!r}: expected {name} >= 1, got {counts[name]}")
        one_budget = self.one_budget or self.max_epochs is None
        names = dict(driver.SCHEDULE_ARGUMENTS)
        if one_budget:
            names["max_budget"] = names["min_budget"] = "search(epochs=)"
        min_budget, max_budget = driver.budgets(None if one_budget else self.max_epochs, self.min_epochs,
                                                1 if epochs is None else epochs)
        try:
            check_schedule(min_budget, max_budget, self.factor, self.max_trials, names=names, whole_budgets=True)
        except ConfigError as exc:
            raise python_argument_error(exc, names, self._face) from None

    def _complete_note(self, experiment, complete: CompleteStudy) -> str:
        """What a rerun of a finished search says (as `hpo search` says it), in this face's arguments."""
        done = f"the study in {self.folder} is complete"
        if complete.stopped_because == "max_trials" and self.max_trials is not None:
            ran = max(complete.trials, self.max_trials)
            return (f"{done}: it has run {ran} trials (max_trials={self.max_trials}). To extend it, pass "
                    f"max_trials={complete.next_max_trials} (its finished trials are kept); "
                    f"overwrite=True starts afresh")
        if complete.stopped_because == "max_trials":
            iterations = self.hyperband_iterations
            return (f"{done}: it has run hyperband_iterations={iterations} ({experiment.search.max_trials} trials). "
                    f"To extend it, pass hyperband_iterations={iterations + 1} (its finished trials are kept); "
                    f"overwrite=True starts afresh")
        return (f"{done}: {self.algorithm} has no configuration left to try. To search again, pass overwrite=True "
                f"(the old study is moved aside to {self.folder.name}.old-<time>)")

    def _prepare(self, data: SearchData, batch_size: int | None, epochs: int | None, callbacks) -> driver.Prepared:
        from hpo.config import experiment_from_dict
        from hpo.config.validation import python_argument_error
        from hpo.errors import ConfigError

        found = self.discovered()
        space = self.space_dict()
        if not space:
            raise ValueError("the search space is empty: build_model declares no hyperparameter to search "
                             "(hp.Int, hp.Float, hp.Choice, hp.Boolean)")
        names = list(space)
        base = self._base_config(found)
        builder = driver.make_builder(self.hp_build, names)
        try:
            with compile_arguments_recorded() as compiled_with:
                model = builder(base)
        except NotAModel as exc:
            raise ValueError(str(exc)) from None
        except Exception as exc:
            raise ValueError(f"build_model failed on {base}: {type(exc).__name__}: {exc}") from exc
        try:
            loss, metrics = loss_and_metrics(model)
            optimizer_params(model)
        except UnsupportedModel as exc:
            raise ValueError(str(exc)) from None
        driver.check_objective(self.objective, metrics)
        _note_logits_loss(model, loss)
        register(data)
        train_examples = self._check_data(model, data, loss)
        from hpo.errors import TrialFailed
        from hpo.tuner.trainer import settings_of
        try:
            settings_of(model, base, loss, metrics)
        except TrialFailed as exc:
            raise ValueError(str(exc)) from None
        tunable = self._tunable(builder, base, model, found, (loss, metrics))
        early = driver.early_stopping_of(callbacks, self.objective if self.keep_best_epoch else None)
        one_budget = self.one_budget or self.max_epochs is None
        notes = []
        if one_budget:
            epochs = epochs or 1
        elif epochs is not None:
            notes.append(f"search(epochs={epochs}) is not used: {type(self).__name__} trains up to "
                         f"max_epochs={self.max_epochs}")
        settings = driver.SearchSettings(
            algorithm=self.algorithm, objective=self.objective, direction=self.direction,
            max_epochs=None if one_budget else self.max_epochs, min_epochs=self.min_epochs, factor=self.factor,
            max_trials=self.max_trials, hyperband_iterations=self.hyperband_iterations, seed=self.seed,
            folder=self.folder, overwrite=self.overwrite, workers=self.workers, scheduler=self.scheduler,
            options=self.options, max_consecutive_failed_trials=self.max_consecutive_failed_trials,
            keep_best_epoch=self.keep_best_epoch)
        raw = driver.experiment_dict(settings, space, data, loss, metrics, data.batch_size or 32, epochs or 1, early,
                                     execution_settings(model, compiled_with.get(id(model))))
        try:
            experiment = experiment_from_dict(raw, source=self._face)
            check_batch_sizes(experiment, train_examples, given_by="given to search")
        except ConfigError as exc:
            raise python_argument_error(exc, driver.ARGUMENT_KEYS, self._face) from None
        parallel = self.workers > 1 or self.scheduler is not None
        if parallel and data.streamed:
            raise ValueError(f"{self._face}: a tf.data.Dataset cannot be sent to worker processes (workers="
                             f"{self.workers}); pass arrays to search, or use workers=1")
        if parallel:
            check_shippable(self.hp_build, self._workers_text())
        import os
        threads = max(1, (os.cpu_count() or 1) // max(1, self.workers)) if parallel else None
        factory = driver.TrainerFactory(self.hp_build, names, tunable, data=data if parallel else None,
                                        threads=threads)
        shape = example_shape(data)
        self._training = {"loss": loss, "metrics": metrics, "names": names, "input_shape": shape}
        return driver.Prepared(experiment, factory, data, shape, notes=tuple(notes))

    def _workers_text(self) -> str:
        return f"scheduler={self.scheduler!r}" if self.scheduler is not None else f"workers={self.workers}"

    def _base_config(self, found: Discovered) -> dict[str, Any]:
        """The defaults (Keras Tuner) or the space's low end (native), active parameters only."""
        space = SearchSpace.from_dict(self.space_dict())
        if self.space is not None:
            from hpo.driver.preflight import low_config
            return dict(low_config(space))
        config: dict[str, Any] = {}
        for p in space.params:
            if p.is_active(config):
                config[p.name] = found.declared[p.name].default
        return config

    def _check_data(self, model, data: SearchData, loss: str) -> int:
        """One eager test step of the default model on a few examples: shapes and targets fit
        (as class indices only where the model's loss reads them so). Returns the training
        examples. Eager, on one batch: `evaluate` would trace its step and a data pipeline for
        these eight examples, about ten times the cost. What fails only when traced fails the
        first trial, with its error."""
        from hpo.config import DataConfig
        from hpo.data import load_dataset
        from hpo.errors import ConfigError, error_line
        from hpo.metric_names import reads_class_indices

        try:
            dataset = load_dataset(DataConfig(dataset=driver.LOADER, options={"key": data.key}),
                                   class_labels=reads_class_indices(loss), announce=False)
        except ConfigError as exc:
            raise ValueError(f"the data given to search cannot be used: {driver.in_python_terms(exc.message)}") \
                from None
        x, y = dataset.first(8)
        eager = model.run_eagerly
        try:
            model.run_eagerly = True
            model.test_on_batch(x, y)
        except Exception as exc:
            raise ValueError(f"the model build_model returns cannot take the data given to search: "
                             f"{type(exc).__name__}: {error_line(exc)}") from None
        finally:
            model.run_eagerly = eager
        return dataset.examples("train")

    def _tunable(self, builder, base: dict[str, Any], model, found: Discovered,
                 compiled: tuple[str, Sequence[str]]) -> list[str]:
        """Parameters that change only the optimizer's hyperparameters: hpo holds those in
        variables, so trials differing only there share one traced program. A parameter named
        as an optimizer setting (`learning_rate`) that the optimizer does not follow is refused
        here, at its second value: its default may happen to equal the compiled one."""
        from hpo.errors import TrialFailed
        from hpo.tuner.trainer import settings_of

        arch, opt = architecture(model), optimizer_params(model)
        gates = {parent for w in found.when.values() for parent in w}
        out = []
        for name, value in base.items():
            d = found.declared.get(name)
            if d is None or name in gates or d.kind not in ("float", "int", "choice"):
                continue
            other = _other_value(d, value)
            if other is None:
                continue
            try:
                alt = builder({**base, name: other})
                if architecture(alt) == arch and optimizer_params(alt) != opt:
                    out.append(name)
            except Exception:   # noqa: BLE001 - a failing variant: keep the parameter structural
                continue
            if name in opt:
                try:
                    settings_of(alt, {**base, name: other}, *compiled)
                except TrialFailed as exc:
                    raise ValueError(str(exc)) from None
        return out

    # --- results -------------------------------------------------------------------------------
    def _reload(self) -> None:
        from hpo.study import DB_NAME
        # With overwrite=True the study there is the one search() moves aside: until then this
        # tuner has no trials, as Keras Tuner's, which deletes the project when constructed.
        if not (self.folder / DB_NAME).exists() or (self.overwrite and not self._moved_aside):
            self._rows = []
            return
        with driver.stored_study(self.folder) as study:
            self._rows = study.trials()

    def _progress(self, progress) -> None:
        best = "" if progress.best_value is None else f", best {self.objective} {progress.best_value:.4f}"
        total = f"/{progress.total}" if progress.total else ""
        log.info("%d%s trials finished%s (%.0f s)", progress.finished, total, best, progress.elapsed)

    @property
    def fixed(self) -> dict[str, Any]:
        return self.discovered_.fixed if self.discovered_ is not None else {}

    @property
    def oracle(self) -> Oracle:
        if not self._rows:
            self._reload()
        return Oracle(objective=ObjectiveName(self.objective, self.direction), max_trials=self.max_trials,
                      direction=self.direction, rows=list(self._rows), fixed=self.fixed)

    @property
    def results(self) -> Results:
        if not self._rows:
            self._reload()
        return rows_of(self._rows)

    def get_best_hyperparameters(self, num_trials: int = 1) -> list[HyperParameters]:
        return [t.hyperparameters for t in self.oracle.get_best_trials(num_trials)]

    def get_best_models(self, num_models: int = 1) -> list:
        """The best configurations' models, each with the weights of its deepest trial's best
        epoch (from the study's checkpoints), compiled as `build_model` compiled it."""
        return [self.load_model(t) for t in self.oracle.get_best_trials(num_models)]

    def load_model(self, trial):
        from hpo.study.store import trial_checkpoint
        from hpo.training.trained_model import load_trained_model
        from hpo.tuner.trainer import compiled_settings

        if not self._training:
            self._training = self._stored_training()
        names = self._training["names"]
        config = {k: v for k, v in trial.hyperparameters.values.items() if k in names}
        builder = driver.make_builder(self.hp_build, names)
        model = builder(config, self._training["input_shape"])
        if not model.built:
            raise ValueError("build_model's model has no weights until its first call (no keras.Input, or a "
                             "subclassed model) and the study keeps no input shape to build it from; give it a "
                             "keras.Input(shape), or call it once on one, in build_model")
        params = compiled_settings(builder, config, self._training["loss"], self._training["metrics"])
        load_trained_model(model, params, trial_checkpoint(self.folder, int(trial.trial_id)))
        return model

    def _stored_training(self) -> dict[str, Any]:
        with driver.stored_study(self.folder) as study:
            stored, input_shape = study.experiment(), study.input_shape()
        return {"loss": stored["training"]["loss"], "metrics": tuple(stored["training"]["metrics"]),
                "names": list(stored["space"]), "input_shape": input_shape}

    def results_summary(self, num_trials: int = 10) -> None:
        """Print the best configurations, as Keras Tuner's `results_summary` does."""
        if not self._rows:
            self._reload()
        print("\n".join(summary_lines(self._rows, self.objective, self.direction, self.fixed, num_trials)))

    def plot(self, ax=None):
        """Each completed trial's objective and the best so far (a matplotlib Axes)."""
        if not self._rows:
            self._reload()
        return plot(self._rows, self.objective, self.direction, ax)

    @property
    def hypermodel(self):
        """`tuner.hypermodel.build(hp)`: a fresh model for `hp` (e.g. the best hyperparameters)."""
        return _Hypermodel(self.hp_build)

    def trial(self, trial_id: str):
        return trial_of(next(r for r in self._rows if r.trial_id == int(trial_id)), self.fixed)


class _Hypermodel:
    def __init__(self, build):
        self._build = build

    def build(self, hp):
        values = hp.values if hasattr(hp, "values") else dict(hp)
        return self._build(HyperParameters(values=dict(values)))


def _declared(param) -> Declared:
    d = param.to_dict()
    if d["type"] == "choice":
        return Declared(param.name, "choice", d["values"][0], values=tuple(d["values"]))
    return Declared(param.name, d["type"], d["low"], d["low"], d["high"], None, d.get("log", False))


def _other_value(d: Declared, value: Any) -> Any:
    if d.kind == "choice":
        numeric = [v for v in d.values if isinstance(v, (int, float)) and not isinstance(v, bool) and v != value]
        return numeric[-1] if numeric else None
    if d.kind in ("int", "float"):
        return d.high if value != d.high else d.low
    return None


class _Console(logging.Filter):
    """The progress handler's filter: the runner's line per interrupted trial is left to hpo.log
    (`search` says it once, with how to resume), and the trial ids are kept for that line."""

    def __init__(self):
        super().__init__()
        self.interrupted: list[int] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "hpo.driver.runner" and str(record.msg).startswith("trial %d interrupted"):
            self.interrupted.append(int(record.args[0]))
            return False
        return True


@contextlib.contextmanager
def _console(verbose: int):
    """Progress on stdout (what a notebook cell shows) when the application has not set up
    logging itself: one line per finished trial and the running best. Yields the handler's
    filter (None when nothing is shown here). The `hpo` logger does not propagate meanwhile:
    its records reach the console once, through this handler, not again through Python's
    last-resort handler."""
    logger = logging.getLogger("hpo")
    if not verbose or logger.handlers or logging.getLogger().handlers:
        yield None
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("[hpo] %(message)s"))
    console = _Console()
    handler.addFilter(console)
    saved, saved_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield console
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)
        logger.propagate = saved_propagate


def _none_completed(rows, failed, folder: Path) -> str:
    """What a search whose finished trials all failed says at its end, rather than ending as
    if it had results: get_best_* would return nothing."""
    last = max(failed, key=lambda t: (t.finished_at or 0.0, t.trial_id))
    why = f" (the last error: {last.error.splitlines()[0]})" if last.error else ""
    return (f"no trial has completed: {len(failed)} of the study's {len(rows)} failed{why}, so get_best_models and "
            f"get_best_hyperparameters return nothing; `hpo status {folder}` shows each trial's error")


def _note_logits_loss(model, loss: str) -> None:
    """A cross-entropy named as a string over a model with a linear output: Keras's compile
    reads the outputs as probabilities (from_logits=False), where hpo trains and scores them
    as logits, as the output says. Trials train well either way hpo runs them, but a model
    `get_best_models` returns evaluates its loss as Keras compiled it: say so once, before the
    search."""
    from hpo.training.loss_metrics import outputs_logits
    from hpo.tuner.compiled_model import compile_config

    if isinstance(compile_config(model).get("loss"), str) and "crossentropy" in loss and outputs_logits(model):
        log.warning("the model's output has no softmax/sigmoid, so hpo trains and scores %r with from_logits=True; "
                    "Keras's compile of the string reads probabilities (from_logits=False), so the loss of a model "
                    "from get_best_models will differ from its trial's: compile with "
                    "keras.losses.%s(from_logits=True), or end the model with a softmax", loss,
                    "".join(part.title() for part in loss.split("_")))

