"""A finished trial's trained model, loaded from its checkpoint: what `hpo best --export` and
the tuner's `load_model` (so `get_best_models`) both read."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from hpo.training.best_epoch import model_checkpoint
from hpo.training.checkpoint import load_checkpoint
from hpo.training.optimizers import TunableOptimizer


def load_trained_model(model, params: Mapping[str, Any], checkpoint: str | Path) -> TunableOptimizer:
    """Fill `model`, built from the trial's resolved `params`, with the trained state of the
    trial checkpointed at `checkpoint` (`Study.checkpoint(trial_id)`): its best epoch's when it
    kept one (`training.keep_best_epoch`), else its last epoch's (`model_checkpoint`, which
    raises `MissingCheckpoint` when neither is on disk). Returns the trainer's optimizer for
    `params`, holding the checkpoint's optimizer state (step count, slots)."""
    tunable = TunableOptimizer(params, model.trainable_variables)
    load_checkpoint(model_checkpoint(checkpoint), model, tunable.optimizer)
    return tunable
