"""The Keras trainer: build, (restore,) train epochs, evaluate, report, checkpoint.

It knows nothing about searchers: it receives a `TrainTask` (a config and an epoch
range) and yields one `EpochReport` per epoch, so the caller can stop it between epochs
by closing the generator.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from hpo.config import TrainingConfig
from hpo.data import Dataset
from hpo.errors import TrialFailed
from hpo.tensorboard_logs import BUDGET_TAG, OBJECTIVE_TAG, write_scalars, write_trial_hparams
from hpo.training.checkpoint import load_checkpoint, save_checkpoint
from hpo.training.compiled_step import make_evaluate, make_train_steps
from hpo.training.devices import resolve_compile_mode
from hpo.training.optimizers import make_optimizer
from hpo.training.task import EpochReport, TrainTask

log = logging.getLogger("hpo.train")

METRICS = ("loss", "accuracy", "val_loss", "val_accuracy")
EVAL_BATCH = 1024


class Trainer:
    """Holds the dataset on one device and trains tasks there, one at a time."""

    def __init__(self, dataset: Dataset, builder: Callable, training: TrainingConfig,
                 fixed_params: Mapping[str, Any], device: str):
        import tensorflow as tf

        # Each trial traces its own step function; TF's "retracing" advice is noise here.
        tf.get_logger().setLevel(logging.ERROR)
        self.dataset = dataset
        self.builder = builder
        self.training = training
        self.fixed_params = dict(fixed_params)
        self.device = device
        self.mode = resolve_compile_mode(training.compile, device)
        with tf.device(device):
            # Copied to the device once per process; every trial gathers batches from these.
            self._x_train = tf.constant(dataset.x_train)
            self._y_train = tf.constant(dataset.y_train)
            self._x_val = tf.constant(dataset.x_val)
            self._y_val = tf.constant(dataset.y_val)

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Trial config over fixed model params over the training defaults."""
        defaults = {"batch_size": self.training.batch_size, "optimizer": self.training.optimizer,
                    "learning_rate": self.training.learning_rate}
        return {**defaults, **self.fixed_params, **dict(config)}

    def build(self, params: Mapping[str, Any], seed: int):
        """A fresh model and built optimizer on this trainer's device."""
        import keras
        import tensorflow as tf

        keras.backend.clear_session()   # drop the previous trial's graph state and name counters
        keras.utils.set_random_seed(seed)
        with tf.device(self.device):
            try:
                model = self.builder(params, self.dataset.input_shape, self.dataset.num_classes)
            except Exception as exc:
                raise TrialFailed(f"model builder failed: {type(exc).__name__}: {exc}") from exc
            optimizer = make_optimizer(params)
            optimizer.build(model.trainable_variables)
        return model, optimizer

    def run(self, task: TrainTask) -> Iterator[EpochReport]:
        import tensorflow as tf

        params = self.resolve(task.config)
        batch_size = int(params["batch_size"])
        n_train = len(self.dataset.x_train)
        steps_per_epoch = n_train // batch_size
        if steps_per_epoch == 0:
            raise TrialFailed(f"batch_size {batch_size} is larger than the {n_train} training examples")
        if task.objective not in METRICS:
            raise TrialFailed(f"objective {task.objective!r} is not a metric this trainer reports {METRICS}")

        model, optimizer = self.build(params, task.seed)
        if task.checkpoint_in:
            restored = load_checkpoint(task.checkpoint_in, model, optimizer)
            if restored != task.start_epoch:
                raise TrialFailed(f"checkpoint {task.checkpoint_in} ends at epoch {restored}, "
                                  f"expected {task.start_epoch}")
        with tf.device(self.device):
            train_steps = make_train_steps(model, optimizer, self._x_train, self._y_train, self.mode)
            evaluate = make_evaluate(model, self.mode)

        writer = tf.summary.create_file_writer(task.tensorboard_run) if task.tensorboard_run else None
        try:
            if writer is not None:
                write_trial_hparams(writer, _run_label(task), task.hparams)
            metrics: dict[str, float] = {}
            for epoch in range(task.start_epoch + 1, task.end_epoch + 1):
                started = time.perf_counter()
                order = np.random.default_rng([task.seed, epoch]).permutation(n_train)
                batches = order[: steps_per_epoch * batch_size].reshape(steps_per_epoch, batch_size).astype("int32")
                total_loss, correct = 0.0, 0
                with tf.device(self.device):
                    for first in range(0, steps_per_epoch, self.training.steps_per_call):
                        chunk_loss, chunk_correct = train_steps(
                            tf.constant(batches[first:first + self.training.steps_per_call]))
                        total_loss += float(chunk_loss)
                        correct += int(chunk_correct)
                loss = total_loss / steps_per_epoch
                if not math.isfinite(loss):
                    raise TrialFailed(f"training loss became {loss} in epoch {epoch}")
                val_loss, val_accuracy = self._evaluate(evaluate)
                metrics = {"loss": loss, "accuracy": correct / (steps_per_epoch * batch_size),
                           "val_loss": val_loss, "val_accuracy": val_accuracy,
                           "learning_rate": float(np.asarray(optimizer.learning_rate)),
                           "epoch_seconds": time.perf_counter() - started}
                if writer is not None:
                    write_scalars(writer, epoch, {k: v for k, v in metrics.items() if math.isfinite(v)})
                yield EpochReport(trial_id=task.trial_id, epoch=epoch, metrics=metrics)
            save_checkpoint(task.checkpoint_out, model, optimizer, task.end_epoch)
            if writer is not None and metrics:
                write_scalars(writer, task.end_epoch, {OBJECTIVE_TAG: metrics[task.objective],
                                                       BUDGET_TAG: float(task.end_epoch)})
        finally:
            if writer is not None:
                writer.close()

    def _evaluate(self, evaluate: Callable) -> tuple[float, float]:
        import tensorflow as tf
        n_val = len(self.dataset.x_val)
        total_loss, correct = 0.0, 0
        with tf.device(self.device):
            for first in range(0, n_val, EVAL_BATCH):
                loss, right = evaluate(self._x_val[first:first + EVAL_BATCH], self._y_val[first:first + EVAL_BATCH])
                total_loss += float(loss)
                correct += int(right)
        val_loss = total_loss / n_val
        if not math.isfinite(val_loss):
            raise TrialFailed(f"validation loss became {val_loss}")
        return val_loss, correct / n_val


def _run_label(task: TrainTask) -> str:
    return str(task.hparams.get("trial_id", task.trial_id))
