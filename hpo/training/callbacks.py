"""`training.callbacks` and `training.early_stopping`: what may end a trial inside its budget.

One `TrialControl` per job. The epoch loop calls it around every epoch, whichever engine
trains: `on_epoch_begin` before, `on_epoch_end` with every value the epoch logs (training
and validation, as Keras's `fit` passes them), then asks whether to stop. Under the `fit`
engine the callbacks also see every batch (`batch_hooks`); the compiled engine runs its
steps inside one traced call and has no batch boundary to call them at. `on_train_begin`
and `on_train_end` are called once per job, not once per epoch.

A trial that stops early ends as a complete trial with fewer epochs: the searcher gets the
objective of its last epoch at the budget it was given, and its final checkpoint stands for
that budget (a promotion continues from the weights it stopped with).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import keras

from hpo.config import EarlyStoppingConfig, TrainingConfig
from hpo.errors import ConfigError
from hpo.metric_names import infer_direction
from hpo.references import resolve

log = logging.getLogger("hpo.train")


def make_callbacks(references: Sequence[str]) -> list:
    """A fresh callback from each `package.module:function` (called with no arguments)."""
    made = []
    for ref in references:
        factory = resolve(ref, key="training.callbacks")
        try:
            callback = factory()
        except Exception as exc:   # the user's function: its error is the user's to fix
            raise ConfigError(f"{ref} failed: {type(exc).__name__}: {exc}", key="training.callbacks") from exc
        if not isinstance(callback, keras.callbacks.Callback):
            raise ConfigError(f"{ref} returned {type(callback).__name__}; expected a keras.callbacks.Callback",
                              key="training.callbacks")
        made.append(callback)
    return made


class EarlyStopping:
    """Keras's rule: an epoch improves when `monitor` beats the best so far by more than
    `min_delta`; stop once `patience` epochs in a row have not (at least one)."""

    def __init__(self, config: EarlyStoppingConfig):
        self.config = config
        self.maximize = infer_direction(config.monitor) == "maximize"
        self.best: float | None = None
        self.wait = 0

    def stop_reason(self, metrics: Mapping[str, float]) -> str | None:
        value = metrics.get(self.config.monitor)
        if value is None:
            return None
        delta = self.config.min_delta
        improved = self.best is None or (value > self.best + delta if self.maximize else value < self.best - delta)
        if improved:
            self.best, self.wait = value, 0
            return None
        self.wait += 1
        if self.wait >= self.config.patience:
            return (f"early stopping: {self.config.monitor} has not improved on {self.best:.6g} by more than "
                    f"{delta:g} for {self.wait} epoch(s)")
        return None


class TrialControl:
    """One job's callbacks and early stopping, on the model the job trains."""

    def __init__(self, model, callbacks: Sequence, early_stopping: EarlyStoppingConfig | None, optimizer=None):
        self.model, self.optimizer = model, optimizer
        self.callbacks = list(callbacks)
        self.early = EarlyStopping(early_stopping) if early_stopping is not None else None
        self._logs: dict[str, float] = {}

    @classmethod
    def for_job(cls, training: TrainingConfig, model, optimizer=None) -> TrialControl | None:
        """None when the experiment has neither callbacks nor early stopping. `optimizer`: the
        Keras optimizer that trains `model`."""
        if not training.callbacks and training.early_stopping is None:
            return None
        return cls(model, make_callbacks(training.callbacks), training.early_stopping, optimizer)

    def begin(self, params: Mapping[str, Any]) -> None:
        self.model.stop_training = False
        if getattr(self.model, "optimizer", None) is None and self.optimizer is not None:
            # The compiled engine's model is never compiled by Keras: callbacks that read or set
            # `model.optimizer.learning_rate` (LearningRateScheduler, ReduceLROnPlateau) find the
            # optimizer that trains it, whose learning rate the step reads from a variable.
            self.model.optimizer = self.optimizer
        for callback in self.callbacks:
            callback.set_model(self.model)
            callback.set_params(dict(params))
            callback.on_train_begin({})

    def epoch_begin(self, epoch: int) -> None:
        """`epoch`: 1-based as the study counts; Keras's hooks get it 0-based."""
        for callback in self.callbacks:
            callback.on_epoch_begin(epoch - 1, {})

    def epoch_end(self, epoch: int, metrics: Mapping[str, float]) -> str | None:
        """Why the trial stops after this epoch, or None to go on."""
        self._logs = dict(metrics)
        for callback in self.callbacks:
            callback.on_epoch_end(epoch - 1, self._logs)
        if getattr(self.model, "stop_training", False):
            return "a callback set model.stop_training"
        return self.early.stop_reason(metrics) if self.early is not None else None

    def end(self) -> None:
        for callback in self.callbacks:
            callback.on_train_end(self._logs)

    def batch_hooks(self) -> list:
        """Callbacks for `model.fit` that pass on only the batch hooks: the epoch and train
        hooks come from the epoch loop, with the validation values fit does not have."""
        return [_BatchHooks(callback) for callback in self.callbacks]


class _BatchHooks(keras.callbacks.Callback):
    """Passes `model.fit`'s batch hooks on to a user's callback."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def on_train_batch_begin(self, batch, logs=None):
        self.inner.on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.inner.on_train_batch_end(batch, logs)
