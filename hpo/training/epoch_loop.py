"""The one epoch loop: every trial trains through it, alone or as one of K trained together.

A `TrialGroup` is K trials that one compiled program trains at once (unfused training is
K = 1, `SingleTrial`). The loop owns what must not differ between the two: the data order,
TensorBoard writers, replaying a stopped attempt's reports, progress and final checkpoints,
evaluation, the per-epoch metrics and the final objective scalar. It yields, per epoch, one
`EpochReport` per trial.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from typing import Iterator, Mapping, Protocol, Sequence

import numpy as np

from hpo.errors import TrialFailed
from hpo.jobs import EpochReport, TrainTask
from hpo.study.tensorboard_logs import BUDGET_TAG, OBJECTIVE_TAG, write_scalars, write_trial_hparams
from hpo.training.best_epoch import BestEpochs
from hpo.training.checkpoint import progress_due, stored_reports
from hpo.training.context import TrainingContext
from hpo.training.training_data import WholeStream, leading
from hpo.training.training_data import steps_per_epoch as epoch_steps

EVAL_BATCH = 1024
log = logging.getLogger("hpo.train")


class TrialGroup(Protocol):
    """K trials of one architecture, batch size and epoch range, trained by one program.

    Two attributes are optional: `whole_epoch` (True: `train_steps` takes the epoch's batches
    in one call and `evaluate` the whole validation set, as Keras's `fit` engine needs) and
    `control` (a lone trial's callbacks and early stopping, `hpo.training.callbacks`)."""

    tasks: Sequence[TrainTask]
    extra_metrics: Mapping[str, float]     # added to every epoch's metrics (a fused group's size)

    def reset_metrics(self) -> None:
        """Zero the training and validation metrics (before an epoch)."""

    def train_steps(self, call) -> np.ndarray:
        """One compiled call over [steps, batch] indices (or, streamed, the stacked batches
        themselves: `hpo.training.training_data`) -> per-trial sums of the steps' mean losses
        [K]; the call also adds its batches to the training metrics."""

    def evaluate(self, x, y) -> np.ndarray:
        """Per-trial summed loss over one validation slice [K]; the slice also goes into the
        validation metrics."""

    def metric_results(self, validation: bool) -> list[dict[str, float]]:
        """Per trial, the configured metrics since the last reset, by name (no `val_` prefix)."""

    def learning_rates(self) -> list[float]: ...

    def save(self, epoch: int, durable: bool, reports: Sequence[list] | None) -> None:
        """Every trial's checkpoint at `epoch`, with the reports a resumed attempt would replay."""

    def save_best(self, trials: Sequence[int], epoch: int) -> None:
        """Trials `trials`' state at `epoch`, their best so far (`hpo.training.best_epoch`)."""


def train_epochs(context: TrainingContext, group: TrialGroup, batch_size: int, replays: Sequence[bool],
                 job_started: float) -> Iterator[list[EpochReport]]:
    """Train the group's epochs on the context's device and data. `replays[i]`: trial i resumes
    its own stopped attempt, whose stored reports are sent again first (the driver may not
    have read them all). Raises `TrialFailed` when a loss is not finite."""
    import tensorflow as tf

    tasks = group.tasks
    k = len(tasks)
    start, end = tasks[0].start_epoch, tasks[0].end_epoch
    steps_per_epoch = epoch_steps(context.data.train_examples, batch_size)
    # A group that trains an epoch (and evaluates) in one call (the fit engine) gets it whole.
    whole_epoch = getattr(group, "whole_epoch", False)
    steps_per_call = steps_per_epoch if whole_epoch else context.training.steps_per_call
    control = getattr(group, "control", None)    # callbacks and early stopping, one trial's
    startup: float | None = None        # job start to the first finished training call
    call_seconds: list[tuple[float, int]] = []   # the first epoch's calls: (seconds, steps)
    writers = [tf.summary.create_file_writer(t.tensorboard_run) if t.tensorboard_run else None for t in tasks]
    try:
        for task, writer in zip(tasks, writers):
            if writer is not None:
                write_trial_hparams(writer, str(task.hparams.get("trial_id", task.trial_id)), task.hparams)
        reports = [stored_reports(t.checkpoint_in) if replay else [] for t, replay in zip(tasks, replays)]
        replayed = [EpochReport(trial_id=t.trial_id, epoch=epoch, metrics=stored, replayed=True)
                    for t, trial_reports in zip(tasks, reports) for epoch, stored in trial_reports]
        if replayed:
            yield replayed
        best = BestEpochs(tasks, reports)
        metrics: list[dict[str, float]] = []
        last_saved = time.monotonic()
        if control is not None:
            control.begin({"epochs": end, "steps": steps_per_epoch, "verbose": 0})
        for epoch in range(start + 1, end + 1):
            if control is not None:
                control.epoch_begin(epoch)
            started = time.perf_counter()
            losses = np.zeros(k)
            steps = 0
            group.reset_metrics()
            with tf.device(context.device):
                for call, call_steps in _epoch_calls(context, tasks[0].data_seed, epoch, batch_size,
                                                     steps_per_call, whole_epoch):
                    call_started = time.perf_counter()
                    losses += group.train_steps(call)
                    steps += call_steps
                    if epoch == start + 1:
                        call_seconds.append((time.perf_counter() - call_started, call_steps))
                    if startup is None:
                        startup = time.perf_counter() - job_started
            losses /= max(steps, 1)
            _check_finite("training loss", losses, tasks, epoch)
            train_metrics = group.metric_results(validation=False)
            val_losses = _evaluate(context, group, k, whole_epoch)
            val_metrics = group.metric_results(validation=True)
            seconds = (time.perf_counter() - started) / k
            metrics = [{"loss": float(losses[i]), **train_metrics[i],
                        "val_loss": float(val_losses[i]), **{f"val_{n}": v for n, v in val_metrics[i].items()},
                        "learning_rate": rate, "epoch_seconds": seconds, **group.extra_metrics}
                       for i, rate in enumerate(group.learning_rates())]
            if epoch == start + 1:
                for trial_metrics in metrics:
                    trial_metrics["startup_seconds"] = startup_overhead(startup, call_seconds)
            for writer, trial_metrics in zip(writers, metrics):
                if writer is not None:
                    write_scalars(writer, epoch, {n: v for n, v in trial_metrics.items() if math.isfinite(v)})
            for trial_reports, trial_metrics in zip(reports, metrics):
                trial_reports.append((epoch, trial_metrics))
            improved = best.improved(metrics) if best.active else []
            if improved:
                group.save_best(improved, epoch)
                best.saved(improved)
            if progress_due(context.training.checkpoint_every, context.training.checkpoint_seconds,
                            epoch, end, last_saved):
                group.save(epoch, durable=False, reports=reports)
                last_saved = time.monotonic()
            yield [EpochReport(trial_id=t.trial_id, epoch=epoch, metrics=m) for t, m in zip(tasks, metrics)]
            stop = control.epoch_end(epoch, metrics[0]) if control is not None else None
            if stop is not None and epoch < end:
                # The final checkpoint below stands for the whole budget (`hpo.training.callbacks`).
                log.info("trial %d stopped after epoch %d of %d: %s", tasks[0].trial_id, epoch, end, stop)
                break
        group.save(end, durable=True, reports=None)
        best.sync()
        for i, (task, writer, trial_metrics) in enumerate(zip(tasks, writers, metrics)):
            if writer is not None:
                write_scalars(writer, end, {OBJECTIVE_TAG: best.objective(i, trial_metrics[task.objective]),
                                            BUDGET_TAG: float(end)})
    finally:
        if control is not None:
            control.end()
        for writer in writers:
            if writer is not None:
                writer.close()


def startup_overhead(first_call_end: float, calls: Sequence[tuple[float, int]]) -> float:
    """Job start to the first training step, and what the first call took beyond training
    its steps (trace, graph optimisation, kernel set-up): its steps at the median per-step
    time of the epoch's later calls come off. With no later call, all of it counts."""
    if len(calls) < 2:
        return first_call_end
    per_step = statistics.median(seconds / steps for seconds, steps in calls[1:])
    first_seconds, first_steps = calls[0]
    return first_call_end - min(first_seconds, first_steps * per_step)


def _epoch_calls(context: TrainingContext, data_seed: int, epoch: int, batch_size: int, steps_per_call: int,
                 whole_epoch: bool) -> Iterator[tuple[object, int]]:
    """(a call's input, its steps) for the epoch. A group that trains a whole epoch per call
    on streamed splits gets the epoch as one `WholeStream`, read batch by batch by its engine,
    rather than one stacked call holding the whole epoch."""
    if whole_epoch and context.data.streamed:
        steps = epoch_steps(context.data.train_examples, batch_size)
        return iter([(WholeStream(context.data.epoch_dataset(data_seed, epoch, batch_size), steps,
                                  steps * batch_size), steps)])
    return context.data.train_calls(data_seed, epoch, batch_size, steps_per_call)


def _evaluate(context: TrainingContext, group: TrialGroup, k: int, whole: bool = False) -> np.ndarray:
    """Per-trial mean validation loss; the validation metrics accumulate in the group
    (`whole`: in one call over the whole validation set; streamed, as one `WholeStream`)."""
    import tensorflow as tf

    losses = np.zeros(k)
    n_val = 0
    with tf.device(context.device):
        if whole:    # a whole-epoch (`fit`) trial reads the split as one Dataset: no array pipeline traced per call
            n_val = context.data.validation_examples
            stream = WholeStream(context.data.validation_dataset(EVAL_BATCH), -(-n_val // EVAL_BATCH), n_val)
            losses += group.evaluate(stream, None)
        else:
            batch = max(context.data.validation_examples, 1) if whole else EVAL_BATCH
            for x, y in context.data.validation_slices(batch):
                losses += group.evaluate(x, y)
                n_val += leading(x)
    losses /= max(n_val, 1)
    _check_finite("validation loss", losses, group.tasks, None)
    return losses


def _check_finite(what: str, values: np.ndarray, tasks: Sequence[TrainTask], epoch: int | None) -> None:
    if np.all(np.isfinite(values)):
        return
    where = f" in epoch {epoch}" if epoch is not None else ""
    if len(tasks) == 1:
        raise TrialFailed(f"{what} became {values[0]}{where}")
    bad = [t.trial_id for t, value in zip(tasks, values) if not math.isfinite(value)]
    raise TrialFailed(f"{what} became non-finite for trial(s) {bad}{where}")
