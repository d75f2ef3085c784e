"""`training.engine`: which engine trains a trial, and why.

`compiled` is hpo's own step (`hpo.training.compiled_step`): the data on the device, many
steps per call, one trace per architecture. `fit` is Keras's `model.fit`
(`hpo.training.fit_engine`), for what the compiled step does not do: a model that
overrides `train_step` (or `test_step`, `compute_loss`), a model with several inputs or
outputs, a loss or metric the compiled step cannot build, and callbacks that hook into
batches (the compiled step calls only the epoch-level hooks). `auto` takes the compiled
engine unless one of those reasons applies. Both engines run in the one epoch loop
(`hpo.training.epoch_loop`), so a study looks the same whichever trained its trials.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from hpo.config import TrainingConfig
from hpo.data.nested import is_nested
from hpo.metric_names import per_output

log = logging.getLogger("hpo.train")

# Keras `Model` methods that, overridden, mean the model trains itself its own way.
_OWN_TRAINING = ("train_step", "test_step", "compute_loss")
# The callback hooks the compiled engine calls; a callback overriding any other needs fit.
EPOCH_HOOKS = frozenset({"on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "set_model",
                         "set_params"})
_BATCH_HOOKS = ("on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end",
                "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end")


@dataclass(frozen=True)
class EngineChoice:
    engine: str          # 'compiled' or 'fit'
    reason: str          # why, for the log


def fit_reasons(model, training: TrainingConfig, callbacks: Sequence = (), y_example=None,
                several_inputs: bool = False) -> list[str]:
    """Why the compiled engine cannot train `model` as the experiment asks ([] when it can).
    `several_inputs`: the data's inputs are a dict or tuple of arrays, which Keras's `fit`
    hands to a model even when it has one input, and the compiled step's gather cannot."""
    import keras

    reasons = []
    overridden = [name for name in _OWN_TRAINING
                  if getattr(type(model), name, None) is not getattr(keras.Model, name)]
    if overridden:
        reasons.append(f"the model overrides {', '.join(overridden)}")
    inputs, outputs = getattr(model, "inputs", None) or (), getattr(model, "outputs", None) or ()
    if len(inputs) > 1:
        reasons.append(f"the model has {len(inputs)} inputs")
    elif several_inputs:
        reasons.append("the inputs hold several arrays")
    if len(outputs) > 1:
        reasons.append(f"the model has {len(outputs)} outputs")
    elif is_nested(y_example):
        reasons.append("the targets hold several arrays")
    if len(outputs) <= 1 and (per_output(training.loss) or per_output(training.metrics)):
        reasons.append("training.loss or training.metrics is given per output")
    hooked = batch_hooked(callbacks)
    if hooked:
        reasons.append(f"the callback(s) {', '.join(hooked)} hook into batches")
    if not reasons and y_example is not None:
        problem = _measures_problem(model, training, y_example)
        if problem:
            reasons.append(problem)
    return reasons


def batch_hooked(callbacks: Sequence) -> list[str]:
    """The names of the callbacks' classes that hook into batches (their hooks need `fit`, one
    step per execution: Keras calls batch hooks once per execution)."""
    import keras
    return sorted({type(cb).__name__ for cb in callbacks for hook in _BATCH_HOOKS
                   if getattr(type(cb), hook, None) is not getattr(keras.callbacks.Callback, hook)})


def _measures_problem(model, training: TrainingConfig, y_example) -> str | None:
    from hpo.training.loss_metrics import LossAndMetrics
    try:
        LossAndMetrics(training.loss, training.metrics, model, y_example)
    except Exception as exc:   # noqa: BLE001 - whatever Keras refuses, fit may still take
        return f"the compiled step cannot build the loss and metrics ({type(exc).__name__}: {exc})"
    return None


def choose_engine(model, training: TrainingConfig, callbacks: Sequence = (), y_example=None,
                  several_inputs: bool = False) -> EngineChoice:
    """The engine for `model` under `training.engine`."""
    if training.engine == "fit":
        return EngineChoice("fit", "training.engine is fit")
    if training.engine == "compiled":
        return EngineChoice("compiled", "training.engine is compiled")
    reasons = fit_reasons(model, training, callbacks, y_example, several_inputs)
    if reasons:
        return EngineChoice("fit", "auto: " + "; ".join(reasons))
    return EngineChoice("compiled", "auto: the compiled step trains this model, loss and metrics")
