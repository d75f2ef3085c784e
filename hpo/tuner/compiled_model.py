"""What a user's compiled model asks of training, in the terms of hpo's trainer.

`build_model(hp)` returns a model compiled with the user's optimizer, loss and metrics.
hpo's engines (the compiled step and the `fit` engine, `hpo.training.engines`) train with
`TunableOptimizer` and the experiment's loss and metric identifiers, so a compiled model is
read here into those terms: the optimizer's class and hyperparameters (`optimizer_params`),
the loss and metric identifiers (`loss_and_metrics`), how steps run (`execution_settings`).
What has no counterpart (another optimizer class, gradient clipping, a learning-rate
schedule, a loss with options) is a `ValueError` naming it, never a silent difference.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
from typing import Any, Iterator, Mapping

from hpo.registry import OPTIMIZERS

# The registry's name of each Keras optimizer class hpo's TunableOptimizer reproduces.
_NAME_BY_KERAS_CLASS = {record.keras_class: name for name, record in OPTIMIZERS.items()}
# Optimizer settings that must hold their default for hpo to train as `fit` would.
_MUST_BE_DEFAULT = {"clipnorm": None, "global_clipnorm": None, "clipvalue": None, "use_ema": False,
                    "loss_scale_factor": None, "gradient_accumulation_steps": None, "amsgrad": False,
                    "centered": False}
# A weight_decay that the optimizer's record does not train is refused (Adam's points at AdamW,
# the record that trains it): hpo's trainer would otherwise train without it, a silent difference.
_ADAM, _ADAMW = OPTIMIZERS["adam"], OPTIMIZERS["adamw"]
_LOSS_OPTIONS_OK = {"from_logits", "reduction", "name", "axis", "ignore_class", "dtype"}


class UnsupportedModel(ValueError):
    """The compiled model asks for something hpo's trainer does not reproduce."""


def compile_config(model) -> dict[str, Any]:
    config = getattr(model, "_compile_config", None)
    if getattr(model, "optimizer", None) is None or config is None:
        raise UnsupportedModel("build_model returned a model that is not compiled; call model.compile(optimizer, "
                               "loss, metrics) in build_model, as Keras Tuner expects")
    return dict(config.config)


@contextlib.contextmanager
def compile_arguments_recorded() -> Iterator[dict[int, dict[str, Any]]]:
    """While open, every `keras.Model.compile` call records the arguments it was given, by
    the model's id: Keras stores `jit_compile="auto"` resolved, so the model alone cannot
    tell an explicit `jit_compile=False` from the default on a CPU-only machine."""
    import keras

    own = "compile" in vars(keras.Model)      # else inherited from Keras's trainer class
    original = keras.Model.compile
    signature = inspect.signature(original)
    given: dict[int, dict[str, Any]] = {}

    def compile(model, *args, **kwargs):
        given[id(model)] = dict(signature.bind_partial(model, *args, **kwargs).arguments)
        return original(model, *args, **kwargs)
    keras.Model.compile = compile
    try:
        yield given
    finally:
        if own:
            keras.Model.compile = original
        else:
            del keras.Model.compile


def execution_settings(model, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The trainer's `training.compile` (and `steps_per_call`) for the model's
    `compile(run_eagerly=, jit_compile=, steps_per_execution=)`, as `given` (the arguments
    `compile_arguments_recorded` saw): eager for run_eagerly; xla for jit_compile=True (graph
    where Keras turned it off, the model not supporting XLA); graph for jit_compile=False;
    hpo's own auto, which measures each architecture, for Keras's default ("auto"). A
    steps_per_execution above 1 is how many steps each compiled call runs; at 1, Keras's
    default, the trainer keeps its own."""
    config, given = compile_config(model), given or {}
    jit = given.get("jit_compile", "auto")
    if given.get("run_eagerly", config.get("run_eagerly")):
        mode = "eager"
    elif isinstance(jit, bool):
        mode = "xla" if jit and getattr(model, "jit_compile", jit) else "graph"
    else:
        mode = "auto"
    settings: dict[str, Any] = {"compile": mode}
    steps = config.get("steps_per_execution", 1)
    if isinstance(steps, int) and steps > 1:
        settings["steps_per_call"] = steps
    return settings


def optimizer_params(model) -> dict[str, Any]:
    """The trainer's optimizer keys (`optimizer`, `learning_rate`, `beta_1`, ...) for the
    model's compiled optimizer."""
    optimizer = model.optimizer
    kind = type(optimizer).__name__
    if kind not in _NAME_BY_KERAS_CLASS:
        raise UnsupportedModel(f"optimizer {kind} is not supported by hpo's trainer; expected one of "
                               f"{', '.join(_NAME_BY_KERAS_CLASS)} (keras.optimizers)")
    config = optimizer.get_config()
    if not isinstance(config.get("learning_rate"), (int, float)):
        raise UnsupportedModel(f"{kind} with a learning-rate schedule is not supported by hpo's trainer; pass a "
                               f"float learning_rate")
    for key, default in _MUST_BE_DEFAULT.items():
        if key in config and config[key] not in (default, 0.0 if default is None else default):
            raise UnsupportedModel(f"{kind}({key}={config[key]!r}) is not supported by hpo's trainer; leave "
                                   f"{key} at its default")
    name = _NAME_BY_KERAS_CLASS[kind]
    record = OPTIMIZERS[name]
    if config.get("weight_decay") and "weight_decay" not in record.hyperparameters:
        instead = (f"use {_ADAMW.keras_class}" if record is _ADAM else
                   "leave weight_decay at its default (a kernel_regularizer on the layers regularises instead)")
        raise UnsupportedModel(f"{kind}(weight_decay=...) is not supported by hpo's trainer; {instead}")
    return {"optimizer": name, **{key: float(config[key]) for key in record.hyperparameters},
            **record.structural_values(config)}


def loss_and_metrics(model) -> tuple[str, tuple[str, ...]]:
    """(loss identifier, metric identifiers) for the experiment's `training.loss` and
    `training.metrics`. A cross-entropy's `from_logits` must match the model's output, as
    hpo infers it (softmax or sigmoid: probabilities, else logits)."""
    from hpo.training.loss_metrics import outputs_logits

    config = compile_config(model)
    loss = config.get("loss")
    if loss is None:
        raise UnsupportedModel("the model is compiled without a loss; pass loss= to model.compile")
    if isinstance(loss, (dict, list, tuple)):
        raise UnsupportedModel("a loss per output is not supported by the Keras Tuner face; compile one loss")
    if config.get("loss_weights") is not None or config.get("weighted_metrics"):
        raise UnsupportedModel("loss_weights and weighted_metrics are not supported by hpo's trainer")
    if isinstance(loss, str):
        loss_id = loss
    else:
        fn = getattr(loss, "fn", None) or (loss if callable(loss) and hasattr(loss, "__name__") else None)
        loss_id = getattr(fn, "__name__", None)
        if loss_id is None or not fn.__module__.startswith("keras"):
            raise UnsupportedModel(f"loss {loss!r} is not supported by the Keras Tuner face; pass a Keras loss "
                                   f"(a name such as 'sparse_categorical_crossentropy' or keras.losses class)")
        options = dict(getattr(loss, "_fn_kwargs", {}))
        defaults = _defaults(fn)      # a class passes every option on, its defaults included
        extra = {k: v for k, v in options.items()
                 if k not in _LOSS_OPTIONS_OK and v is not None and (k not in defaults or v != defaults[k])}
        if extra:
            raise UnsupportedModel(f"loss {loss_id} with {extra} is not supported by hpo's trainer")
        if options.get("ignore_class") is not None:
            raise UnsupportedModel(f"loss {loss_id}(ignore_class=...) is not supported by hpo's trainer")
        reduction = getattr(loss, "reduction", "sum_over_batch_size")
        # Without sample weights, each of these is the batch's mean, as hpo's trainer takes it.
        if reduction not in (None, "sum_over_batch_size", "auto", "mean", "mean_with_sample_weight"):
            raise UnsupportedModel(f"loss {loss_id}(reduction={reduction!r}) is not supported by hpo's trainer")
        if "from_logits" in options and "crossentropy" in loss_id:
            logits = outputs_logits(model)
            if bool(options["from_logits"]) != logits:
                raise UnsupportedModel(
                    f"loss {loss_id}(from_logits={options['from_logits']}) does not match the model's output "
                    f"({'no' if logits else 'a'} softmax/sigmoid activation); hpo takes from_logits from the "
                    f"output activation")
    metrics = config.get("metrics") or []
    if isinstance(metrics, dict):
        raise UnsupportedModel("metrics per output are not supported by the Keras Tuner face")
    ids = []
    for metric in metrics:
        if isinstance(metric, str):
            ids.append(metric)
            continue
        kind = type(metric).__name__
        fn = getattr(metric, "__name__", None) if callable(metric) and not hasattr(metric, "update_state") else None
        if fn is not None and getattr(metric, "__module__", "").startswith("keras"):
            ids.append(fn)
            continue
        from keras import metrics as km
        stem = _as_by_name(metric) if type(metric) is getattr(km, kind, None) else None
        if stem is not None:
            ids.append(stem)
            continue
        raise UnsupportedModel(f"metric {metric!r} is not supported by the Keras Tuner face; pass a Keras metric "
                               f"name such as 'accuracy' or a keras.metrics class with its default name")
    return loss_id, tuple(ids)


def _defaults(fn) -> dict:
    """The keyword defaults of a loss function (empty where it has no signature to read)."""
    import inspect
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in parameters if p.default is not p.empty}


def _as_by_name(metric) -> str | None:
    """The name string a Keras metric object is, or None: it must carry its class's default
    name (Keras numbers a repeated default, `auc_1`) and every setting at its default (an
    `AUC(curve="PR")` or a `Precision(thresholds=0.7)` is another metric than 'auc' or
    'precision')."""
    try:
        default = type(metric)()
    except TypeError:     # a class with required settings (PrecisionAtRecall(recall)) has no plain name
        return None
    stem = re.sub(r"_\d+$", "", default.name)
    settings = {k: v for k, v in metric.get_config().items() if k != "name"}
    defaults = {k: v for k, v in default.get_config().items() if k != "name"}
    same = settings == defaults and re.fullmatch(re.escape(stem) + r"(_\d+)?", metric.name)
    return stem if same else None


def _snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def architecture(model) -> str:
    """The model's layers and their settings, without names: two builds with the same
    architecture give the same text."""
    layers = []
    for layer in model._flatten_layers(include_self=False):
        layers.append([type(layer).__name__, _nameless(layer.get_config())])
    return json.dumps(layers, sort_keys=True, default=str)


def _nameless(value):
    if isinstance(value, dict):
        return {k: _nameless(v) for k, v in value.items() if k not in ("name", "seed")}
    if isinstance(value, (list, tuple)):
        return [_nameless(v) for v in value]
    return value
