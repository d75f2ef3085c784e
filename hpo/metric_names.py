"""Loss and metric identifiers, the names trials log under, which way an objective points,
and the model measures an objective may name beside them.

No TensorFlow here: `hpo.config` validates `training.loss`, `training.metrics` and infers
`search.direction` from these tables when an experiment loads, and the runner compares epochs
in an objective's direction (`beats`) and names the model measures without importing the
trainer. The identifiers are the strings Keras's own `keras.losses.get` /
`keras.metrics.get` accept (`tests/training/test_loss_metrics.py` checks each against Keras);
`hpo.training.loss_metrics` builds the objects.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from hpo.references import REFERENCE
from hpo.registry import MODEL_MEASURES

DEFAULT_LOSS = "sparse_categorical_crossentropy"
DEFAULT_METRICS = ("accuracy",)


def reads_class_indices(loss: str | Mapping[str, str]) -> bool:
    """Whether `loss` (an identifier, or one per output) reads the targets as class indices
    0..K-1, so that a loader's labels are checked as such: the default loss does, for every
    output; any other takes float targets, one-hot rows included."""
    losses = loss.values() if isinstance(loss, Mapping) else (loss,)
    return all(name == DEFAULT_LOSS for name in losses)

LOSSES = ("sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
          "binary_focal_crossentropy", "categorical_focal_crossentropy",
          "mean_squared_error", "mse", "mean_absolute_error", "mae", "mean_absolute_percentage_error", "mape",
          "mean_squared_logarithmic_error", "msle", "huber", "log_cosh", "kl_divergence", "kld", "poisson",
          "hinge", "squared_hinge", "categorical_hinge", "cosine_similarity")

# "acc" is Keras's short name for "accuracy", resolved the same way, and logged as "acc".
METRICS = ("accuracy", "acc", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
           "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy", "auc", "precision", "recall",
           "f1_score", "r2_score",
           "mae", "mse", "mape", "msle", "mean_absolute_error", "mean_squared_error", "root_mean_squared_error",
           "mean_absolute_percentage_error", "mean_squared_logarithmic_error", "log_cosh_error",
           "binary_crossentropy", "categorical_crossentropy", "sparse_categorical_crossentropy",
           "kl_divergence", "poisson", "cosine_similarity", "hinge", "squared_hinge", "categorical_hinge")

# Names the epoch loop writes beside the metrics; a metric may not take one of them.
RESERVED = ("loss", "learning_rate", "epoch_seconds", "startup_seconds", "fused_trials")

# Keras Tuner's rule (keras_tuner.engine.metrics_tracking.infer_metric_direction): scores that
# grow with quality are maximised, losses and errors minimised.
_MAXIMISED = ("accuracy", "acc", "auc", "precision", "recall", "f1_score", "fbeta_score", "r2_score",
              "cosine_similarity", "iou", "mean_iou", "true_positives", "true_negatives")


def logged_name(identifier: str) -> str:
    """The name a metric is logged under: the identifier as written (Keras's `compile` keeps
    the string it is given), or a `package.module:function`'s function name."""
    match = REFERENCE.match(identifier)
    return match["attr"] if match else identifier


def metric_log_names(metrics: Sequence[str]) -> tuple[str, ...]:
    return tuple(logged_name(m) for m in metrics)


# --- several outputs -----------------------------------------------------------------------------
# `training.loss` is one loss for every output, or a mapping {output name: loss}; `training.metrics`
# a list for every output, or a mapping {output name: [metrics]}: Keras's `compile` rules. A model
# with several outputs logs, as Keras's `fit` does, `loss` (the sum), `<output>_loss` and
# `<output>_<metric>` (`val_price_mae`).

def loss_for(loss: str | Mapping[str, str], output: str) -> str | None:
    """The loss of one output (None: a mapping that does not name it)."""
    return loss.get(output) if isinstance(loss, Mapping) else loss


def metrics_for(metrics: Sequence[str] | Mapping[str, Sequence[str]], output: str) -> tuple[str, ...]:
    """The metrics of one output."""
    return tuple(metrics.get(output, ())) if isinstance(metrics, Mapping) else tuple(metrics)


def metric_ids(metrics: Sequence[str] | Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """Every metric identifier named, once, in order."""
    if isinstance(metrics, Mapping):
        return tuple(dict.fromkeys(m for listed in metrics.values() for m in listed))
    return tuple(metrics)


def per_output(value) -> bool:
    """A `training.loss` or `training.metrics` given per output name."""
    return isinstance(value, Mapping)


def named_outputs(loss: str | Mapping[str, str],
                  metrics: Sequence[str] | Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The output names a per-output `training.loss` or `training.metrics` names (a loss given
    per output names every output): what the driver, which never builds the model, knows of them."""
    names = [*(loss if isinstance(loss, Mapping) else ()), *(metrics if isinstance(metrics, Mapping) else ())]
    return tuple(dict.fromkeys(names))


def objective_names(metrics: Sequence[str] | Mapping[str, Sequence[str]],
                    outputs: Sequence[str] = ()) -> tuple[str, ...]:
    """Every per-epoch value a Keras trial logs that can be an objective: the loss and each
    metric, on the training and the validation data. `outputs`: a model's output names when
    it has several (each then logs its loss and metrics as `<output>_<name>`); metrics given
    per output name, with no `outputs`, stand for the outputs they name."""
    if not outputs and isinstance(metrics, Mapping) and len(metrics) > 1:
        outputs = tuple(metrics)
    if len(outputs) > 1:
        names = tuple(f"{o}_{n}" for o in outputs for n in ("loss", *metric_log_names(metrics_for(metrics, o))))
    else:
        names = metric_log_names(metric_ids(metrics))
    return ("loss", *names, "val_loss", *(f"val_{n}" for n in names))


def maybe_logged(name: str, metrics: Sequence[str] | Mapping[str, Sequence[str]]) -> bool:
    """`name` is logged for one output or could be one output's (`[val_]<output>_<loss or metric>`),
    before the model says what its outputs are called (the pre-flight checks it against them)."""
    if name in objective_names(metrics):
        return True
    base = name.removeprefix("val_")
    return any(base.endswith(f"_{n}") and len(base) > len(n) + 1
               for n in ("loss", *metric_log_names(metric_ids(metrics))))


def infer_direction(objective: str) -> str:
    """'maximize' for accuracy, AUC, precision, recall and other scores; 'minimize' for losses,
    errors and anything unknown (override with `search.direction`)."""
    name = objective.removeprefix("val_").lower()
    if name.endswith("loss"):
        return "minimize"
    # One output's metric of a model with several (`category_f1_score`) points as the metric does.
    if name in _MAXIMISED or name.endswith(("accuracy", "_auc", "precision", "recall",
                                            *(f"_{m}" for m in _MAXIMISED))) \
            or name.startswith(("precision_at", "recall_at", "sensitivity_at", "specificity_at")):
        return "maximize"
    return "minimize"


def beats(value: float | None, best: float | None, maximize: bool) -> bool:
    """Whether an epoch's objective `value` beats the best so far (None or not finite: none
    yet); a missing or non-finite value beats nothing."""
    if value is None or not math.isfinite(value):
        return False
    if best is None or not math.isfinite(best):
        return True
    return value > best if maximize else value < best


# --- model measures ------------------------------------------------------------------------------
# Values hpo computes once per trial after training (`registry.MODEL_MEASURES`, measured by
# `hpo.training.model_measures`), which objectives and constraints may name beside the logged metrics.

def model_measures_in(names: Iterable[str]) -> tuple[str, ...]:
    """The model measures among `names`, in `MODEL_MEASURES` order."""
    names = set(names)
    return tuple(m for m in MODEL_MEASURES if m in names)
