"""The pre-flight: everything `hpo search` can check before a study folder exists.

After the experiment file is validated (hpo.config) and before the driver takes the lock
and writes anything: the objective is the loss or a configured metric (several objectives
and constraints: each names one or a model measure, and the searcher takes them), the
device is on this machine, a Dask scheduler named by address answers, the loader runs once
and returns usable data (arrays to split, or named splits of arrays or tf.data elements,
checked split by split: `hpo.data.loading`), the builder, called once with the low end of
the space, returns a `keras.Model` (whose output holds every label under the default loss)
and reads every space key, and the loss and metrics compute on its outputs for the first
examples, each `training.callbacks` function returns a Keras callback, and
`training.engine: compiled` is not asked to train a model only `fit` can. For a model with
several outputs, a loss or metrics given per output name name its outputs, and every
objective, constraint and early-stopping monitor is a value it logs (`<output>_<metric>`):
those names are checked once the model is built.
Each failure is a ConfigError (exit 2) naming the key, the function and what was wrong,
so a corrected file then runs without `--fresh`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from hpo.config import Experiment
from hpo.data.nested import is_nested
from hpo.errors import ConfigError, did_you_mean, error_line
from hpo.metric_names import DEFAULT_LOSS, maybe_logged, objective_names, per_output
from hpo.models import BUILDERS
from hpo.registry import MODEL_MEASURES, OPTIMIZER_PARAMS

log = logging.getLogger("hpo.driver.preflight")


@dataclass(frozen=True)
class PreflightFindings:
    """What the pre-flight learnt from the one model it built, for the driver (which builds none)."""
    output_names: tuple[str, ...] = ()     # a model with several outputs: their names, else ()
    data_fingerprint: str | None = None    # how the loader split its examples (`Dataset.fingerprint`)
    # The data it loaded and checked: a trainer in this process (the inline backend) trains on
    # it rather than loading it again, which for a large or streamed split costs what this load did.
    dataset: Any = None


def preflight(experiment: Experiment) -> PreflightFindings:
    """Raise ConfigError (located in the experiment file) on the first problem found."""
    try:
        return _check(experiment)
    except ConfigError as err:
        raise err.located(source=experiment.source) from None


def _check(experiment: Experiment) -> PreflightFindings:
    from hpo.data import load_dataset

    objective = experiment.search.objective
    reported = objective_names(experiment.training.metrics)
    if experiment.search.objectives or experiment.search.constraints:
        _check_goals(experiment, reported)
    elif not maybe_logged(objective, experiment.training.metrics):
        # The default objective (val_accuracy) fails a regression that never set one: say so.
        default = " (the default: set search.objective)" if objective == type(experiment.search).objective else ""
        raise ConfigError(f"expected the loss or a configured metric, on the training or validation data "
                          f"({', '.join(reported)}), got {objective!r}{default}{did_you_mean(objective, reported)}; "
                          f"a metric is added with training.metrics", key="search.objective")
    else:
        # The searcher, built once as the driver will build it: an option it refuses
        # (`search.options: {model: gpp}`) is found here, not after the study folder exists.
        from hpo.driver.runner import searcher_for
        searcher_for(experiment)
    _check_device(experiment)
    _check_scheduler(experiment)
    dataset = load_dataset(experiment.data, experiment.seed, experiment.training.class_labels, announce=False)
    check_batch_sizes(experiment, dataset.examples("train"))
    model = _check_builder(experiment, dataset.input_shape, dataset.num_classes)
    callbacks = _check_callbacks(experiment)
    if model is not None:
        x, y = dataset.first(8)
        outputs = _check_outputs(experiment, model)
        if not outputs and is_nested(y):
            kind = "a dict" if isinstance(y, dict) else "a tuple"
            raise ConfigError(f"the loader {experiment.data.dataset!r} gives targets as {kind} of "
                              f"{len(y)} array(s), but the builder {experiment.model.builder!r}'s model has one "
                              f"output; expected the one target array itself, or a model with an output per "
                              f"array", key="data.dataset")
        if outputs:
            _check_several_outputs(experiment, model, x, y)
        else:
            _check_loss_and_metrics(experiment, model, x, y)
        _check_engine(experiment, model, callbacks, y, is_nested(x))
        return PreflightFindings(output_names=tuple(outputs), data_fingerprint=dataset.fingerprint(),
                                 dataset=dataset)
    return PreflightFindings(data_fingerprint=dataset.fingerprint(), dataset=dataset)


def _check_goals(experiment: Experiment, reported: tuple[str, ...]) -> None:
    """Every objective and constraint names a logged value or a model measure, and the
    searcher takes them (built here once: searchers are cheap and import no TensorFlow)."""
    from hpo.search import UnknownOption, make_searcher

    search = experiment.search
    goals = search.goals()
    known = reported + MODEL_MEASURES
    for kind, names in (("objectives", goals.names), ("constraints", tuple(c.name for c in goals.constraints))):
        for name in names:
            if name not in known and not maybe_logged(name, experiment.training.metrics):
                raise ConfigError(f"unknown name {name!r}{did_you_mean(name, known)}; expected the loss or a "
                                  f"configured metric, on the training or validation data, or a model measure "
                                  f"({', '.join(known)})", key=f"search.{kind}")
    try:
        make_searcher(search.algorithm, experiment.space, seed=experiment.seed, direction=search.direction,
                      min_budget=search.min_budget, max_budget=search.max_budget, eta=search.eta,
                      options=search.options, objectives=goals.objectives, constraints=list(search.constraints))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UnknownOption) and exc.name in search.options:    # an option it lacks, not the goals
            from hpo.driver.runner import unknown_option_error
            raise unknown_option_error(experiment, exc) from None
        what = "several objectives" if goals.multi else "constraints"
        raise ConfigError(f"the searcher {search.algorithm!r} cannot take {what} as given: {exc}",
                          key="search.objectives" if goals.multi else "search.constraints") from None


def _check_device(experiment: Experiment) -> None:
    """A named device must exist here; on `dask` the workers' devices are the workers' own."""
    if experiment.training.device == "auto" or experiment.execution.backend == "dask":
        return
    from hpo.training.devices import available_devices, enable_memory_growth, select_device
    enable_memory_growth()
    select_device(experiment.training.device, available_devices())


def _check_scheduler(experiment: Experiment) -> None:
    """A Dask scheduler named by address answers (within Dask's connect timeout)."""
    address = experiment.execution.scheduler
    if experiment.execution.backend != "dask" or not address:
        return
    from hpo.executors.dask_watch import SchedulerUnreachable, join_scheduler
    try:
        join_scheduler(address).close()
    except SchedulerUnreachable as exc:
        raise ConfigError(str(exc), key="execution.scheduler") from None


def check_batch_sizes(experiment: Experiment, train_examples: int, given_by: str | None = None) -> None:
    """A trial whose batch is larger than the training split fails (a step needs a whole
    batch): exit 2 where every trial would (the smallest batch a trial can draw is too large),
    a warning naming the values that fail where only some are. `given_by`: where the
    examples come from, as the user knows it (default: the experiment's loader)."""
    space = experiment.space
    fallback = experiment.trial_params({})["batch_size"]      # model.params, else training.batch_size
    if "batch_size" in space.names:
        param = space["batch_size"]
        sizes, key = (list(param.values), "space.batch_size.values") if hasattr(param, "values") \
            else ([param.low, param.high], "space.batch_size")
        if param.when:             # inactive, the trial takes the fallback
            sizes.append(fallback)
    else:
        sizes = [fallback]
        key = "model.params.batch_size" if "batch_size" in experiment.model.params else "training.batch_size"
    if min(sizes) > train_examples:
        given_by = given_by or f"the loader {experiment.data.dataset!r} gives"
        raise ConfigError(f"a batch of {min(sizes)} is larger than the {train_examples} training examples "
                          f"{given_by}, so every trial would fail; expected a batch_size of at most "
                          f"{train_examples}", key=key)
    if max(sizes) > train_examples:
        log.warning("%s: batch sizes above %d (up to %d) are larger than the training split, and the trials that "
                    "draw one will fail", key, train_examples, max(sizes))


def low_config(space) -> dict[str, Any]:
    """The low end of every range and the first of every choice (conditional parameters as
    those activate them): the cheapest model to build, since sizes grow with the values."""
    return space.from_unit([0.0] * len(space))


def _several_inputs(input_shape) -> bool:
    """Whether the loader's inputs are several arrays: `Dataset.input_shape` is then a dict or a
    tuple of shapes rather than one shape."""
    return isinstance(input_shape, dict) or any(isinstance(d, tuple) for d in input_shape)


def _wrapped_arrays_hint(experiment: Experiment, input_shape, num_classes) -> str:
    """Where a builder failed on inputs or targets the loader gave as several arrays: a builder
    then gets their shapes and class counts in that structure, which one written for a single
    input and output cannot read. Empty where the loader gave single arrays."""
    several = []
    if _several_inputs(input_shape):
        several.append(f"its inputs as several arrays (input shapes {input_shape})")
    if is_nested(num_classes):
        several.append(f"its targets as several arrays (num_classes {num_classes})")
    if not several:
        return ""
    return (f"; the loader {experiment.data.dataset!r} gives {' and '.join(several)}: a model of one input and "
            f"one output takes the arrays themselves")


def _check_builder(experiment: Experiment, input_shape: tuple, num_classes: int):
    """The builder's model at the low end of the space (checked), or a ConfigError."""
    import keras

    from hpo.models import get_builder
    ref = experiment.model.builder
    builder = get_builder(ref)
    config = experiment.trial_params(low_config(experiment.space))
    recorder = ReadRecorder(config)
    if ref in BUILDERS and _several_inputs(input_shape):
        raise ConfigError(f"the built-in model {ref!r} takes one input array, but the loader "
                          f"{experiment.data.dataset!r} returns several (input shapes {input_shape}); expected a "
                          f"builder of your own, 'package.module:function', for several inputs", key="model.builder")
    try:
        model = builder(recorder, input_shape, num_classes)
    except Exception as exc:   # the user's builder: its error is the user's to fix
        raise ConfigError(f"the builder {ref!r} failed on the low end of the space {config}: "
                          f"{type(exc).__name__}: {exc}{_wrapped_arrays_hint(experiment, input_shape, num_classes)}",
                          key="model.builder") from None
    if not isinstance(model, keras.Model):
        raise ConfigError(f"the builder {ref!r} returned {type(model).__name__}; expected a keras.Model",
                          key="model.builder")
    _check_named_values(experiment, builder, config, recorder.read, input_shape, num_classes)
    # A subclassed model has no `outputs` until it is called: nothing to compare then.
    symbolic_outputs = getattr(model, "outputs", None) or ()
    outputs = symbolic_outputs[0].shape[-1] if len(symbolic_outputs) == 1 else None
    if experiment.training.loss == DEFAULT_LOSS and outputs is not None and isinstance(num_classes, int) \
            and outputs < num_classes:
        raise ConfigError(f"the builder {ref!r} gives {outputs} outputs, but the labels run 0..{num_classes - 1}; "
                          f"expected a final layer of num_classes={num_classes} logits", key="model.builder")
    trainer_keys = set(OPTIMIZER_PARAMS) | {"batch_size"}
    unread = [name for name in experiment.space.names if name not in recorder.read and name not in trainer_keys]
    if not unread:
        return model
    if ref in BUILDERS:
        name = unread[0]
        known = sorted(recorder.read | trainer_keys)
        raise ConfigError(f"the built-in model {ref!r} never reads '{name}'{did_you_mean(name, known)}; it reads "
                          f"{', '.join(sorted(recorder.read))} (and the trainer: {', '.join(sorted(trainer_keys))})",
                          key=f"space.{name}")
    log.warning("the builder %s never read the space key(s) %s on its first build: check their spelling",
                ref, ", ".join(unread))
    return model


def _check_named_values(experiment: Experiment, builder, config: Mapping[str, Any], read: set[str],
                        input_shape, num_classes) -> None:
    """For a built-in model, one more build per other value of each choice of names it read
    (an activation): a misspelt name later in the list would otherwise fail only the trials
    that draw it. Names, not numbers: another number may build a far larger model; and not a
    builder of the user's, whose other names may cost far more (another backbone, its weights
    downloaded). Each value's config is the space's low end with that value, so the
    parameters it turns on (`when`) are there."""
    if experiment.model.builder not in BUILDERS:
        return
    space = experiment.space
    for index, param in enumerate(space.params):
        values = getattr(param, "values", ())
        if param.name not in read or param.name not in config or not all(isinstance(v, str) for v in values):
            continue
        for value in values:
            if value == config[param.name]:
                continue
            unit = [0.0] * len(space)
            unit[index] = param.to_unit(value)
            try:
                builder(experiment.trial_params(space.from_unit(unit)), input_shape, num_classes)
            except (ValueError, TypeError, KeyError, AttributeError) as exc:   # a name the model cannot take
                raise ConfigError(f"the builder {experiment.model.builder!r} failed with {param.name}={value!r}: "
                                  f"{type(exc).__name__}: {exc}", key=f"space.{param.name}.values") from None


def _check_loss_and_metrics(experiment: Experiment, model, x, y) -> None:
    """The loss and every metric compute on the builder's outputs for the first examples."""
    from hpo.training.loss_metrics import LossAndMetrics, check_on_batch

    training = experiment.training
    try:
        measures = LossAndMetrics(training.loss, training.metrics, model, y)
        problem = check_on_batch(measures, model, x, y)
    except ConfigError:
        raise
    except Exception as exc:   # noqa: BLE001 - Keras refusing the combination is the user's to fix
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        key = "training.loss" if problem.startswith("loss") else "training.metrics"
        raise ConfigError(f"with the builder {experiment.model.builder!r} and the loader "
                          f"{experiment.data.dataset!r}: {problem}", key=key)


def _check_outputs(experiment: Experiment, model) -> tuple[str, ...]:
    """A loss or metrics given per output name name the model's outputs, and every objective,
    constraint and early-stopping monitor is a value the model logs: a model with several
    outputs logs `<output>_loss` and `<output>_<metric>` (`hpo.metric_names`). The model's
    output names when it has several, else ()."""
    from hpo.training.fit_engine import output_names

    training, search = experiment.training, experiment.search
    ref = experiment.model.builder
    outputs = output_names(model)
    for key, value in (("training.loss", training.loss), ("training.metrics", training.metrics)):
        if not per_output(value):
            continue
        if not outputs:
            raise ConfigError(f"is given per output name ({', '.join(value)}), but the builder {ref!r}'s model has "
                              f"one output; expected {'one loss' if key == 'training.loss' else 'a list'}", key=key)
        unknown = [name for name in value if name not in outputs]
        missing = [name for name in outputs if name not in value] if key == "training.loss" else []
        if unknown or missing:
            problem = f"names {unknown[0]!r}, not an output" if unknown else f"has no loss for {missing[0]!r}"
            raise ConfigError(f"{problem} of the builder {ref!r}'s model; its outputs are {', '.join(outputs)}"
                              f"{did_you_mean(unknown[0], outputs) if unknown else ''}", key=key)
    reported = objective_names(training.metrics, outputs)
    known = reported + MODEL_MEASURES
    named = [("search.objective", search.objective)] if not (search.objectives or search.constraints) else \
        [("search.objectives", n) for n in search.goals().names] + \
        [("search.constraints", c.name) for c in search.goals().constraints]
    if training.early_stopping is not None:
        named.append(("training.early_stopping.monitor", training.early_stopping.monitor))
    for key, name in named:
        if name not in known:
            what = f"the model's outputs {', '.join(outputs)} log" if outputs else "the model logs"
            raise ConfigError(f"{name!r} is not a value {what}{did_you_mean(name, reported)}; expected the loss or a "
                              f"configured metric, on the training or validation data ({', '.join(reported)})",
                              key=key)
    return outputs


def _check_several_outputs(experiment: Experiment, model, x, y) -> None:
    """The per-output losses and metrics compute on the first examples, as Keras's `fit` will
    compute them (a model with several outputs trains on the fit engine)."""
    import math

    from hpo.training.fit_engine import several_outputs_compile

    training = experiment.training
    losses, metrics = several_outputs_compile(training.loss, training.metrics, model)
    try:
        model.compile(optimizer="sgd", loss=losses, metrics=metrics, run_eagerly=True)
        logs = model.evaluate(x, y, verbose=0, return_dict=True)
    except Exception as exc:   # noqa: BLE001 - Keras refusing the combination is the user's to fix
        raise ConfigError(f"with the builder {experiment.model.builder!r} and the loader {experiment.data.dataset!r}: "
                          f"the losses and metrics failed on the model's outputs and the targets: "
                          f"{type(exc).__name__}: {error_line(exc)}",
                          key="training.loss") from None
    if not math.isfinite(float(logs.get("loss", 0.0))):
        raise ConfigError(f"with the builder {experiment.model.builder!r}: the loss gave {logs['loss']} on the "
                          f"first examples", key="training.loss")


def _check_callbacks(experiment: Experiment) -> list:
    """One callback from each `training.callbacks` function (a ConfigError if it is none)."""
    if not experiment.training.callbacks:
        return []
    from hpo.training.callbacks import make_callbacks
    return make_callbacks(experiment.training.callbacks)


def _check_engine(experiment: Experiment, model, callbacks: list, y, several_inputs: bool) -> None:
    """`training.engine: compiled` on a model only Keras's `fit` trains as asked is refused."""
    from hpo.training.engines import choose_engine, fit_reasons

    training = experiment.training
    if training.engine == "compiled":
        reasons = fit_reasons(model, training, callbacks, y, several_inputs)
        if reasons:
            raise ConfigError(f"the compiled engine cannot train the builder {experiment.model.builder!r}'s model "
                              f"as asked: {'; '.join(reasons)}; expected 'fit' or 'auto'", key="training.engine")
    elif training.engine == "auto":
        choice = choose_engine(model, training, callbacks, y, several_inputs)
        log.info("engine for the low end of the space: %s (%s)", choice.engine, choice.reason)


class ReadRecorder(Mapping[str, Any]):
    """A config that remembers which keys a builder asked for, present or not."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = dict(values)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self._values.get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        self.read.update(self._values)      # a builder that copies the config reads it all
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)
