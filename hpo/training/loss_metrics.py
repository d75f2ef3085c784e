"""The experiment's loss and metrics, built for one model, for the compiled step to use.

`LossAndMetrics` holds the loss as a per-example function and one set of Keras metric
objects for training and one for validation. The compiled step and evaluation update the
metric objects inside the traced function; the epoch loop resets them before an epoch and
reads them once after it, so a metric costs no host round trip per step.

A model that ends in softmax or sigmoid outputs probabilities: its cross-entropy takes
`from_logits=False`. Any other model outputs logits: its cross-entropy takes
`from_logits=True`, and the metrics see the probabilities the matching activation gives
(AUC, precision and thresholded accuracy are defined on probabilities).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from hpo.errors import ConfigError, error_line
from hpo.metric_names import logged_name
from hpo.references import resolve

# Cross-entropies and the activation that turns logits into what they score.
_PROBABILITY_LOSSES = {"sparse_categorical_crossentropy": "softmax", "categorical_crossentropy": "softmax",
                       "categorical_focal_crossentropy": "softmax", "binary_crossentropy": "sigmoid",
                       "binary_focal_crossentropy": "sigmoid"}
# Metrics that read only the arg-max of the outputs: the same on logits and probabilities.
_ARGMAX_METRICS = frozenset({"sparse_categorical_accuracy", "categorical_accuracy", "top_k_categorical_accuracy",
                             "sparse_top_k_categorical_accuracy"})


def output_activation(model, output: int = 0) -> str | None:
    """'softmax' or 'sigmoid' when the model's output layer (the `output`-th, for a model with
    several) ends in one, else None (logits)."""
    import keras

    layer = None
    outputs = getattr(model, "outputs", None)
    try:
        if outputs:
            layer = outputs[output]._keras_history.operation
    except (AttributeError, ValueError, TypeError):
        layer = None
    if layer is None:
        layers = getattr(model, "layers", None)
        layer = layers[-1] if layers else None
    if layer is None:
        return None
    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    activation = getattr(layer, "activation", None)
    name = getattr(activation, "__name__", None) or (activation if isinstance(activation, str) else None)
    return name if name in ("softmax", "sigmoid") else None


def outputs_logits(model, output: int = 0) -> bool:
    return output_activation(model, output) is None


class LossAndMetrics:
    """The loss and metrics of one program's model. `y_example`: a few training targets, for
    resolving `accuracy` as Keras does from the targets' and outputs' shapes."""

    def __init__(self, loss: str, metrics: Sequence[str], model, y_example):
        self.loss_id = loss
        self.metric_ids = tuple(metrics)
        self.names = tuple(logged_name(m) for m in metrics)
        self.from_logits = outputs_logits(model)
        self._loss = _loss_function(loss, self.from_logits)
        output_units = _output_units(model)
        self._resolved = [_resolve_metric_id(m, loss, y_example, output_units) for m in self.metric_ids]
        self.train_metrics = [_metric_object(m, r) for m, r in zip(self.metric_ids, self._resolved)]
        self.val_metrics = [_metric_object(m, r) for m, r in zip(self.metric_ids, self._resolved)]
        activation = _PROBABILITY_LOSSES.get(loss) if self.from_logits else None
        needs_probabilities = any(r not in _ARGMAX_METRICS for r in self._resolved)
        self._to_probabilities = activation if needs_probabilities else None
        # Plain means of a per-example function (keras's MeanMetricWrapper, as the accuracies,
        # errors and cross-entropies are) are summed across a call's steps; the rest update per step.
        import keras
        plain = [type(m).update_state is keras.metrics.MeanMetricWrapper.update_state
                 and hasattr(m, "_fn") for m in self.train_metrics]
        self._summed = [m for m, p in zip(self.train_metrics, plain) if p]
        self._updated = [m for m, p in zip(self.train_metrics, plain) if not p]

    def mean_loss(self, y, outputs):
        """The batch's mean loss (a scalar), what the gradient is taken of."""
        import tensorflow as tf
        return tf.reduce_mean(self._values(y, outputs))

    def summed_loss(self, y, outputs):
        """The batch's loss summed over examples, so slices of different sizes add up."""
        import tensorflow as tf
        values = self._values(y, outputs)
        if values.shape.rank == 0:      # a custom loss that reduces itself returns the mean
            return values * tf.cast(tf.shape(outputs)[0], values.dtype)
        return tf.reduce_sum(values)

    def _values(self, y, outputs):
        import tensorflow as tf
        return tf.cast(self._loss(y, outputs), tf.float32)

    def update(self, metrics: Sequence, y, outputs) -> None:
        """Add a batch to `metrics` (`train_metrics` or `val_metrics`); traced into the step."""
        if not metrics:
            return
        import keras
        if self._to_probabilities is not None:
            outputs = getattr(keras.activations, self._to_probabilities)(outputs)
        for metric in metrics:
            metric.update_state(y, outputs)

    def start_sums(self) -> tuple:
        """Loop-carried sums for the training metrics that are means of per-example values
        (accuracy, MAE, ...): a compiled step adds each batch to these tensors and commits them
        to the metric variables once per call (`commit_sums`), which in graph mode costs far
        less than two variable updates per metric per step. Other metrics (AUC, precision,
        ...) are updated in place by `accumulate`."""
        import tensorflow as tf
        return tuple((tf.constant(0.0), tf.constant(0.0)) for _ in self._summed)

    def accumulate(self, sums: tuple, y, outputs) -> tuple:
        """`sums` ((total, count) per summed metric) with one batch added; the metrics that
        are not plain means are updated on the batch directly."""
        import keras
        import tensorflow as tf

        if self._to_probabilities is not None:
            outputs = getattr(keras.activations, self._to_probabilities)(outputs)
        added = []
        for (total, count), metric in zip(sums, self._summed):
            values = tf.cast(metric._fn(y, outputs, **metric._fn_kwargs), tf.float32)
            if values.shape.rank is not None and values.shape.rank > 1:
                values = tf.reduce_mean(values, axis=list(range(1, values.shape.rank)))
            # As keras's Mean counts: one per example, or one for a function that returns a scalar.
            examples = tf.cast(tf.size(values), tf.float32) if values.shape.rank != 0 else tf.constant(1.0)
            added.append((total + tf.reduce_sum(values), count + examples))
        for metric in self._updated:
            metric.update_state(y, outputs)
        return tuple(added)

    def commit_sums(self, sums: tuple) -> None:
        for (total, count), metric in zip(sums, self._summed):
            metric.total.assign_add(total)
            metric.count.assign_add(count)

    def reset(self) -> None:
        for metric in (*self.train_metrics, *self.val_metrics):
            metric.reset_state()

    def results(self, validation: bool) -> dict[str, float]:
        """The metrics since the last reset, by logged name (no `val_` prefix)."""
        metrics = self.val_metrics if validation else self.train_metrics
        return {name: _scalar(metric.result()) for name, metric in zip(self.names, metrics)}


def _scalar(value: Any) -> float:
    import numpy as np
    array = np.asarray(value, dtype="float64")
    return float(array.mean()) if array.size != 1 else float(array.reshape(()))


def _output_units(model) -> int | None:
    outputs = getattr(model, "outputs", None)
    try:
        return int(outputs[0].shape[-1]) if outputs else None
    except (TypeError, IndexError):
        return None


def _loss_function(loss: str, from_logits: bool) -> Callable:
    """A per-example loss: `f(y, outputs)` -> [batch] (or a scalar for a custom loss that
    reduces itself); target and output ranks are reconciled as Keras's losses do."""
    import keras

    if loss in _PROBABILITY_LOSSES:
        cls = {"sparse_categorical_crossentropy": keras.losses.SparseCategoricalCrossentropy,
               "categorical_crossentropy": keras.losses.CategoricalCrossentropy,
               "categorical_focal_crossentropy": keras.losses.CategoricalFocalCrossentropy,
               "binary_crossentropy": keras.losses.BinaryCrossentropy,
               "binary_focal_crossentropy": keras.losses.BinaryFocalCrossentropy}[loss]
        return cls(from_logits=from_logits, reduction=None)
    function = keras.losses.get(loss) if ":" not in loss else resolve(loss, key="training.loss")
    if isinstance(function, type):
        function = function()
    if isinstance(function, keras.losses.Loss):
        return function

    def per_example(y, outputs):
        import tensorflow as tf
        y, outputs = _same_rank(tf.cast(y, outputs.dtype), outputs)
        return function(y, outputs)
    return per_example


def _same_rank(y, outputs):
    """Targets [batch] against outputs [batch, 1] (or the reverse) as Keras's losses take
    them: the unit axis is dropped, so nothing broadcasts to [batch, batch]."""
    import tensorflow as tf
    y_rank, out_rank = y.shape.rank, outputs.shape.rank
    if y_rank is not None and out_rank is not None:
        if out_rank == y_rank + 1 and outputs.shape[-1] == 1:
            outputs = tf.squeeze(outputs, -1)
        elif y_rank == out_rank + 1 and y.shape[-1] == 1:
            y = tf.squeeze(y, -1)
    return y, outputs


def _resolve_metric_id(metric: str, loss: str, y_example, output_units: int | None) -> str:
    """`accuracy` as Keras's `compile` resolves it: by the loss, else by the targets' and
    outputs' shapes (one output: binary; integer class indices: sparse; else categorical)."""
    if metric not in ("accuracy", "acc"):
        return metric
    by_loss = {"sparse_categorical_crossentropy": "sparse_categorical_accuracy",
               "categorical_crossentropy": "categorical_accuracy",
               "categorical_focal_crossentropy": "categorical_accuracy",
               "binary_crossentropy": "binary_accuracy", "binary_focal_crossentropy": "binary_accuracy"}
    if loss in by_loss:
        return by_loss[loss]
    target_rank = len(getattr(y_example, "shape", ())) or 1
    if output_units == 1:
        return "binary_accuracy"
    if target_rank == 1 or (getattr(y_example, "shape", (0, 0))[-1] == 1):
        return "sparse_categorical_accuracy"
    return "categorical_accuracy"


def _metric_object(identifier: str, resolved: str):
    import keras

    name = logged_name(identifier)
    if ":" in identifier:
        function = resolve(identifier, key="training.metrics")
        if isinstance(function, type):
            return function()
        return keras.metrics.MeanMetricWrapper(function, name=name)
    try:
        return keras.metrics.get(resolved)
    except ValueError as exc:
        raise ConfigError(f"Keras does not know the metric {identifier!r}: {exc}", key="training.metrics") from None


def score(measures: LossAndMetrics, model, x, y, batch: int = 1024) -> tuple[float, dict[str, float]]:
    """(mean loss, metrics by logged name) of `model` on arrays, with the validation metrics."""
    return score_batches(measures, model, ((x[first:first + batch], y[first:first + batch])
                                           for first in range(0, len(x), batch)))


def score_batches(measures: LossAndMetrics, model, batches) -> tuple[float, dict[str, float]]:
    """`score` over (x, y) batches: a streamed split's, or slices of arrays."""
    measures.reset()
    total, examples = 0.0, 0
    for x, y in batches:
        outputs = model(x, training=False)
        total += float(measures.summed_loss(y, outputs))
        measures.update(measures.val_metrics, y, outputs)
        examples += int(x.shape[0])
    return total / max(1, examples), measures.results(validation=True)


def keras_loss(loss: str, model, output: int = 0):
    """The loss for Keras's own `compile` (an exported model): a cross-entropy with the
    model's (or its `output`-th output's) `from_logits`, else the identifier or the referenced
    function."""
    import keras

    if loss in _PROBABILITY_LOSSES:
        logits = outputs_logits(model, output)
        return type(_loss_function(loss, logits))(from_logits=logits)
    return _instance(resolve(loss, key="training.loss")) if ":" in loss else keras.losses.get(loss)


def keras_metric(metric: str):
    """A metric for Keras's own `compile`: the identifier, or the referenced function or (an
    instance of) class."""
    return _instance(resolve(metric, key="training.metrics")) if ":" in metric else metric


def _instance(referenced):
    """A referenced class as an instance, as the trainer uses it: Keras's `compile` takes the
    class too, but saving the model then calls `get_config` on the class."""
    return referenced() if isinstance(referenced, type) else referenced


def check_on_batch(measures: LossAndMetrics, model, x, y) -> str | None:
    """None when the loss and every metric compute on this batch, else which failed and why
    (the pre-flight's check that the targets, outputs, loss and metrics fit together)."""
    outputs = model(x, training=False)
    try:
        value = measures.summed_loss(y, outputs)
        if not bool(__import__("numpy").isfinite(float(value))):
            return f"loss {measures.loss_id!r} gave {float(value)} on the first examples"
    except Exception as exc:   # noqa: BLE001 - a shape or dtype mismatch is the user's to fix
        return f"loss {measures.loss_id!r} failed on the model's outputs {tuple(outputs.shape)} and the " \
               f"targets {tuple(y.shape)}: {type(exc).__name__}: {error_line(exc)}{_integer_targets_hint(y, outputs)}"
    for identifier, metric in zip(measures.metric_ids, measures.val_metrics):
        try:
            measures.update([metric], y, outputs)
            metric.result()
        except Exception as exc:   # noqa: BLE001
            return f"metric {identifier!r} failed on the model's outputs {tuple(outputs.shape)} and the " \
                   f"targets {tuple(y.shape)}: {type(exc).__name__}: {error_line(exc)}"
    measures.reset()
    return None


def _integer_targets_hint(y, outputs) -> str:
    """Integer targets, one per example, are counted as class indices 0..K-1 for the builder's
    num_classes whatever the loss: a regression on counts then meets K outputs."""
    import numpy as np

    y = np.asarray(y)
    if y.ndim == 1 and y.dtype.kind in "iu" and len(outputs.shape) == 2 and outputs.shape[-1] > 1:
        return (f"; the targets are integers, so they were counted as class indices and the model built for "
                f"num_classes={outputs.shape[-1]}: for a regression (one value per example), return them as "
                f"floats (y.astype('float32'))")
    return ""

