"""The `fit` engine: an epoch trained by Keras's own `model.fit`, evaluated by `model.evaluate`.

A fit program is a `TrainingProgram` like the compiled engine's, so the trainer's cache,
fresh-start assignment, checkpoints (`model.variables` and the optimizer's variables) and
compile-mode choice serve it unchanged: the model is compiled by Keras with the same
`TunableOptimizer` (hyperparameters in variables, so one traced `train_function` serves every
trial of the architecture), `jit_compile` from the compile mode (`xla`; `graph` is plain
`tf.function`, `eager` is `run_eagerly`) and `steps_per_execution` from
`training.steps_per_call`. Its `train_steps` trains one whole epoch in one `fit` call on the
epoch's batches in the study's order (`training_data.epoch_batches`), so both engines see the
same data; its `evaluate` scores the whole validation set in one `evaluate` call, as a `WholeStream` (a
Dataset of its batches). Streamed (tf.data) training splits reach it as `WholeStream`s too;
an in-memory epoch's batches become a Dataset: `fit` and `evaluate` read them batch by batch,
where arrays would have Keras build and trace a data pipeline at every call. Keras
resets its metrics at the start of each call, so an epoch must not be split across calls:
`FitTrial.whole_epoch` tells the epoch loop so.

The values come from the logs Keras returns: the loss and each configured metric by its
logged name. A model with several outputs is compiled with a loss and metrics per output
name (`training.loss` / `training.metrics`: one for all outputs or a mapping by output name,
`hpo.metric_names`) and logs what Keras logs: `loss` (their sum), `<output>_loss` and
`<output>_<metric>`. A model whose own `train_step` does not return a configured metric has it
missing from its training values.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import numpy as np

from hpo.metric_names import logged_name, loss_for, metrics_for, objective_names
from hpo.training.loss_metrics import LossAndMetrics, keras_loss, keras_metric
from hpo.training.optimizers import TunableOptimizer
from hpo.training.program import TrainingProgram
from hpo.training.single_trial import SingleTrial
from hpo.training.training_data import WholeStream

ENGINE_KEY = "__engine__"


def fit_signature(signature: str) -> str:
    """The architecture signature of the fit engine's program: apart from the compiled
    engine's, so the two never share a cached program or a compile-mode decision."""
    structure = json.loads(signature)
    structure[ENGINE_KEY] = "fit"
    return json.dumps(structure, sort_keys=True)


def is_fit_signature(signature: str) -> bool:
    return json.loads(signature).get(ENGINE_KEY) == "fit"


def output_names(model) -> tuple[str, ...]:
    """The model's output names when it has several (what Keras keys its per-output losses,
    metrics and logs by), else ()."""
    outputs = getattr(model, "outputs", None) or ()
    return tuple(model.output_names) if len(outputs) > 1 else ()


def several_outputs_compile(loss, metrics, model) -> tuple[dict, dict]:
    """(loss, metrics) for Keras's `compile` of a model with several outputs, keyed by output
    name: each output's loss with that output's `from_logits`, and its metrics."""
    from hpo.errors import ConfigError

    names = output_names(model)
    losses, listed = {}, {}
    for index, name in enumerate(names):
        identifier = loss_for(loss, name)
        if identifier is None:
            raise ConfigError(f"names no loss for the model's output {name!r}; expected a loss for each of "
                              f"{', '.join(names)}", key="training.loss")
        losses[name] = keras_loss(identifier, model, output=index)
        listed[name] = [keras_metric(m) for m in metrics_for(metrics, name)]
    return losses, listed


class FitMeasures:
    """The last `fit` and `evaluate` logs, read as the configured metrics by logged name (for
    several outputs, each output's loss and metrics as `<output>_<name>`)."""

    def __init__(self, metrics, outputs: Sequence[str] = ()):
        if outputs:
            self.names = tuple(n for n in objective_names(metrics, outputs)
                               if n != "loss" and not n.startswith("val_"))
        else:
            self.names = tuple(logged_name(m) for m in metrics)
        self.logs: dict[bool, dict[str, float]] = {False: {}, True: {}}

    def reset(self) -> None:
        self.logs = {False: {}, True: {}}

    def record(self, logs: Mapping[str, Any], validation: bool) -> None:
        self.logs[validation] = {k: _scalar(v) for k, v in logs.items()}

    def loss(self, validation: bool) -> float:
        return self.logs[validation].get("loss", float("nan"))

    def results(self, validation: bool) -> dict[str, float]:
        logs = self.logs[validation]
        return {name: logs[name] for name in self.names if name in logs}


def _scalar(value: Any) -> float:
    array = np.asarray(value, dtype="float64")
    return float(array.mean()) if array.size != 1 else float(array.reshape(()))


def build_fit_program(signature: str, model, params: Mapping[str, Any], x_train, y_train, mode: str,
                      single_pass: bool, loss: str, metrics: Sequence[str],
                      steps_per_execution: int, y_example=None) -> TrainingProgram:
    """`model` compiled by Keras for the experiment's loss and metrics (called under the target
    device scope), as a program the trainer caches and the epoch loop drives. `x_train` and
    `y_train` are the device's arrays the epochs gather from (None when streamed);
    `y_example`, a few targets Keras resolves `accuracy` by."""
    import tensorflow as tf

    optimizer = TunableOptimizer(params, model.trainable_variables, single_pass)
    outputs = output_names(model)
    if outputs:
        keras_loss_object, compiled_metrics = several_outputs_compile(loss, metrics, model)
    else:
        # The same metric objects the compiled step builds ('accuracy' resolved by the loss and
        # targets), under their logged names so Keras logs them so.
        compiled_metrics = LossAndMetrics(loss, metrics, model,
                                          y_train[:2] if y_example is None else y_example).train_metrics
        for identifier, metric in zip(metrics, compiled_metrics):
            metric.name = logged_name(identifier)
        keras_loss_object = keras_loss(loss, model)
    model.compile(optimizer=optimizer.optimizer, loss=keras_loss_object, metrics=compiled_metrics,
                  jit_compile=mode == "xla", run_eagerly=mode == "eager", steps_per_execution=steps_per_execution)
    measures = FitMeasures(metrics, outputs)

    def train_steps(batch_indices, callbacks: Sequence = ()):
        """One `fit` call over the batches [steps, batch] (or a streamed epoch, a `WholeStream`)
        -> (sum of the steps' mean losses,)."""
        if isinstance(batch_indices, WholeStream):
            history = model.fit(batch_indices.dataset, epochs=1, steps_per_epoch=batch_indices.batches,
                                shuffle=False, verbose=0, callbacks=list(callbacks))
            measures.record({k: v[-1] for k, v in history.history.items() if v}, validation=False)
            return (tf.constant(measures.loss(validation=False) * batch_indices.batches, tf.float32),)
        indices = tf.convert_to_tensor(batch_indices)
        steps, batch_size = int(indices.shape[0]), int(indices.shape[1])
        flat = tf.reshape(indices, [-1])
        x = tf.nest.map_structure(lambda a: tf.gather(a, flat), x_train)
        y = tf.nest.map_structure(lambda a: tf.gather(a, flat), y_train)
        # As a Dataset of the epoch's batches: arrays would have Keras build and trace a data
        # pipeline of its own at every call.
        batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
        history = model.fit(batches, epochs=1, shuffle=False, verbose=0, callbacks=list(callbacks))
        measures.record({k: v[-1] for k, v in history.history.items() if v}, validation=False)
        return (tf.constant(measures.loss(validation=False) * steps, tf.float32),)

    def evaluate(stream: WholeStream, _y=None):
        """Summed validation loss over the validation split, given as one `WholeStream` (the
        epoch loop's way for a whole-epoch trial, in memory or streamed), scored in one
        `evaluate` call."""
        logs = model.evaluate(stream.dataset, steps=stream.batches, verbose=0, return_dict=True)
        measures.record(logs, validation=True)
        return np.float32(measures.loss(validation=True) * stream.examples)

    return TrainingProgram(signature, mode, model, optimizer, train_steps, evaluate, measures)


class FitTrial(SingleTrial):
    """One trial on the fit engine, for the epoch loop: a whole epoch per `fit` call, the
    whole validation set per `evaluate` call, batch hooks of its callbacks passed to fit."""

    whole_epoch = True

    def train_steps(self, batch_indices) -> np.ndarray:
        hooks = self.control.batch_hooks() if self.control is not None else ()
        (loss,) = self.program.train_steps(batch_indices, hooks)
        return np.array([float(loss)])
