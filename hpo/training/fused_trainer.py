"""Training a group of fusable tasks together on one Trainer's device and data.

`train_fused(trainer, tasks)` yields, per epoch, one `EpochReport` per task, exactly as the
tasks' own `Trainer.run` would (same data order, same metrics), and leaves each task's
checkpoint and TensorBoard run as an unfused trial would. Any failure raises
`FusedGroupFailed`; the caller then runs the tasks one by one, so one bad configuration
cannot sink the others.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Sequence

import numpy as np

from hpo.tensorboard_logs import BUDGET_TAG, OBJECTIVE_TAG, write_scalars, write_trial_hparams
from hpo.training.call_timing import first_call_seconds, steady_seconds
from hpo.training.checkpoint import load_checkpoint, progress_due, save_arrays, stored_reports
from hpo.training.fuse_size import (MIN_STEPS_TO_PROBE, FuseChoice, FuseDecisions, bytes_per_trial, free_memory,
                                    memory_cap, probe_sizes, provisional_k, smallest_near_best)
from hpo.training.fused import FusedProgram, fusable
from hpo.training.optimizers import TunableOptimizer
from hpo.training.spare_slots import CallTimes, best_spare_program
from hpo.training.program import architecture_signature
from hpo.training.task import EpochReport, TrainTask
from hpo.training.trainer import epoch_batches, resume_point
from hpo.training.xla_fusion import single_pass_update

log = logging.getLogger("hpo.train")

CACHE_CAPACITY = 8


class FusedGroupFailed(RuntimeError):
    """The group could not train fused; run its tasks unfused."""


def group_key(trainer, task: TrainTask) -> tuple | None:
    """Tasks with equal keys can fuse: one traced graph, one batch size, the same epochs and
    the same batches (one data seed)."""
    params = trainer.resolve(task.config)
    return (architecture_signature(params, trainer.builder), int(params["batch_size"]), task.start_epoch,
            task.end_epoch, task.data_seed)


def train_fused(trainer, tasks: Sequence[TrainTask]) -> Iterator[list[EpochReport]]:
    import tensorflow as tf

    # An earlier attempt's progress checkpoints (a killed worker or driver): a group that
    # wrote them together resumes together; one torn mid-write no longer shares a start
    # epoch, and its tasks resume one by one through the unfused fallback.
    resumed = [resume_point(t) for t in tasks]
    replays = [r is not t and r.checkpoint_in == t.checkpoint_out for r, t in zip(resumed, tasks)]
    tasks = resumed
    try:
        prepared = prepare_group(trainer, tasks)
    except FusedGroupFailed:
        raise
    except Exception as exc:   # noqa: BLE001 - anything odd: fall back to unfused
        raise FusedGroupFailed(f"{type(exc).__name__}: {exc}") from exc
    program, params, scratch = prepared
    k = len(tasks)
    start, end = tasks[0].start_epoch, tasks[0].end_epoch
    batch_size = int(params[0]["batch_size"])
    n_train = len(trainer.dataset.x_train)
    steps_per_epoch = n_train // batch_size
    writers = [tf.summary.create_file_writer(t.tensorboard_run) if t.tensorboard_run else None for t in tasks]
    try:
        for task, writer in zip(tasks, writers):
            if writer is not None:
                write_trial_hparams(writer, str(task.hparams.get("trial_id", task.trial_id)), task.hparams)
        metrics: list[dict[str, float]] = []
        # The stopped attempt's reports may not all have reached the driver: send them again.
        reports = [stored_reports(t.checkpoint_in) if replay else [] for t, replay in zip(tasks, replays)]
        replayed = [EpochReport(trial_id=t.trial_id, epoch=epoch, metrics=stored, replayed=True)
                    for t, trial_reports in zip(tasks, reports) for epoch, stored in trial_reports]
        if replayed:
            yield replayed
        every, min_gap = trainer.training.checkpoint_every, trainer.training.checkpoint_seconds
        last_saved = time.monotonic()
        for epoch in range(start + 1, end + 1):
            started = time.perf_counter()
            batches = epoch_batches(tasks[0].data_seed, epoch, n_train, batch_size)
            losses, correct = np.zeros(k), np.zeros(k, dtype=np.int64)
            with tf.device(trainer.device):
                for first in range(0, steps_per_epoch, trainer.training.steps_per_call):
                    chunk = batches[first:first + trainer.training.steps_per_call]
                    call_started = time.perf_counter()
                    chunk_loss, chunk_correct = program.train_steps(tf.constant(chunk))
                    # Slots past k are spare (spare_slots.py): their results are not trials'.
                    losses += chunk_loss.numpy()[:k]
                    correct += chunk_correct.numpy()[:k]
                    program.call_times.record(len(chunk), time.perf_counter() - call_started)
            losses /= steps_per_epoch
            if not np.all(np.isfinite(losses)):
                bad = [t.trial_id for t, loss in zip(tasks, losses) if not math.isfinite(loss)]
                raise FusedGroupFailed(f"training loss became non-finite for trial(s) {bad} in epoch {epoch}")
            val_losses, val_correct = (values[:k] for values in _evaluate(trainer, program))
            seconds = time.perf_counter() - started
            metrics = [{"loss": float(losses[i]), "accuracy": float(correct[i]) / (steps_per_epoch * batch_size),
                        "val_loss": float(val_losses[i]), "val_accuracy": float(val_correct[i]),
                        "learning_rate": float(params[i]["learning_rate"]), "epoch_seconds": seconds / k,
                        "fused_trials": float(k)} for i in range(k)]
            for i, writer in enumerate(writers):
                if writer is not None:
                    write_scalars(writer, epoch, metrics[i])
            for trial_reports, trial_metrics in zip(reports, metrics):
                trial_reports.append((epoch, trial_metrics))
            # Progress checkpoints on the unfused trainer's schedule, so a killed group resumes.
            if progress_due(every, min_gap, epoch, end, last_saved):
                _save_all(program, scratch, tasks, epoch, durable=False, reports=reports)
                last_saved = time.monotonic()
            yield [EpochReport(trial_id=t.trial_id, epoch=epoch, metrics=m) for t, m in zip(tasks, metrics)]
        _save_all(program, scratch, tasks, end)
        for i, task in enumerate(tasks):
            if writers[i] is not None and metrics:
                write_scalars(writers[i], end, {OBJECTIVE_TAG: metrics[i][task.objective], BUDGET_TAG: float(end)})
    except FusedGroupFailed:
        raise
    except GeneratorExit:
        raise
    except Exception as exc:   # noqa: BLE001 - the caller retries unfused
        raise FusedGroupFailed(f"{type(exc).__name__}: {exc}") from exc
    finally:
        for writer in writers:
            if writer is not None:
                writer.close()


def _save_all(program: FusedProgram, scratch, tasks: Sequence[TrainTask], epoch: int,
              durable: bool = True, reports: Sequence[list] | None = None) -> None:
    """Every trial's checkpoint, in the unfused layout, from one host copy of the state."""
    trial_arrays = program.checkpoint_arrays(*scratch)
    contents = [trial_arrays(i) for i in range(len(tasks))]

    def write(i: int) -> None:
        save_arrays(tasks[i].checkpoint_out, *contents[i], epoch, durable, reports[i] if reports else ())

    # Writes and fsyncs release the GIL: 8 checkpoints of a 2x128 MLP took 23-26 ms on 4
    # threads against 31-34 ms one after another (fsync is ~1.6 ms of each 4.8 ms write);
    # overwriting earlier files, on another day, 28.7 ms against 30.6.
    if len(tasks) == 1:
        write(0)
        return
    with ThreadPoolExecutor(max_workers=min(4, len(tasks))) as pool:
        list(pool.map(write, range(len(tasks))))


def prepare_group(trainer, tasks: Sequence[TrainTask], spare_slots: bool = True):
    """The group's fused program (cached per architecture, K, device and mode) with every task's
    fresh or checkpointed state loaded -> (program, resolved params, scratch model and optimizer).
    With `spare_slots`, a bigger cached program may take the group, its first len(tasks) slots
    the tasks', when its measurements say that is cheaper than compiling one (spare_slots.py)."""
    import tensorflow as tf

    keys = {group_key(trainer, t) for t in tasks}
    if len(keys) != 1:
        raise FusedGroupFailed("the tasks do not share an architecture, batch size, epochs and data seed")
    params = [trainer.resolve(t.config) for t in tasks]
    signature = architecture_signature(params[0], trainer.builder)
    # The group's work together decides whether measuring the modes pays, as one job's does.
    batch_size = int(params[0]["batch_size"])
    mode = trainer.mode_for(signature, params[0], tasks[0].seed,
                            steps=sum(trainer.job_steps(t, batch_size) for t in tasks))
    cache = _cache(trainer)
    key = (signature, len(tasks), trainer.device, mode)
    program = cache.get(key)
    values = [trainer.fresh_weights(p, t.seed) for p, t in zip(params, tasks)]
    if program is None and spare_slots:
        candidates = [(slots, cached.call_times, cached) for (sig, slots, device, cached_mode), cached in cache.items()
                      if (sig, device, cached_mode) == (signature, trainer.device, mode)]
        program = best_spare_program(len(tasks), trainer.job_steps(tasks[0], batch_size), candidates)
        if program is not None:
            # The spare slots train a copy of the first task, whose results are dropped.
            spare = program.k - len(tasks)
            log.debug("trials %s train in a %d-trial fused program, %d slots spare", [t.trial_id for t in tasks],
                      program.k, spare)
            key = (signature, program.k, trainer.device, mode)
            tasks, params, values = (list(x) + [x[0]] * spare for x in (tasks, params, values))
    with tf.device(trainer.device):
        if program is None:
            # One live model of the architecture: the structure to fuse, and the scratch model
            # checkpoints go in and out through (every group of this architecture reuses it).
            template = trainer.build_model(params[0], tasks[0].seed)
            reason = fusable(template, params[0])
            if reason is not None:
                raise FusedGroupFailed(reason)
            program = FusedProgram(template, values, params, trainer._x_train, trainer._y_train, mode,
                                   single_pass_update(mode, trainer.device), trainer.device)
            program.scratch = (template, TunableOptimizer(params[0], template.trainable_variables))
            program.call_times = CallTimes()
            cache[key] = program
            while len(cache) > CACHE_CAPACITY:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
            program.reset(values, params)
        scratch_model, scratch_optimizer = program.scratch
        for i, task in enumerate(tasks):
            if task.checkpoint_in:
                load_checkpoint(task.checkpoint_in, scratch_model, scratch_optimizer.optimizer)
                program.import_trial(i, scratch_model, scratch_optimizer.optimizer)
    return program, params, (scratch_model, scratch_optimizer)


def group_size(trainer, tasks: Sequence[TrainTask]) -> int:
    """`fuse: auto`: how many of `tasks` (one group key) to fuse, decided once per architecture
    and device from free memory and a measured probe (`hpo.training.fuse_size`)."""
    params = trainer.resolve(tasks[0].config)
    batch_size = int(params["batch_size"])
    key = (architecture_signature(params, trainer.builder), batch_size, trainer.device)
    decisions = _fuse_decisions(trainer)
    choice = decisions.choices.get(key)
    if choice is not None and (choice.settled or len(tasks) <= choice.k):
        return choice.k
    caps = decisions.memory_caps
    if key not in caps:
        template = trainer.build_model(params, tasks[0].seed)
        fits = fusable(template, params) is None
        caps[key] = memory_cap(bytes_per_trial(template, batch_size), free_memory(trainer.device)) if fits else 1
        decisions.provisional[key] = provisional_k(template, trainer.device)
    cap = caps[key]
    if cap == 1:
        return 1
    if choice is None and trainer.job_steps(tasks[0], batch_size) * len(tasks) < MIN_STEPS_TO_PROBE:
        return min(cap, decisions.provisional[key])   # too little work to repay a probe; a longer group measures
    choice = _probe(trainer, tasks, params, cap, choice)
    decisions.choices[key] = choice
    log.info("fused trials, %s", choice.describe())
    return choice.k


def _probe(trainer, tasks: Sequence[TrainTask], params: dict, cap: int, earlier: FuseChoice | None) -> FuseChoice:
    """Time a training call at K = 1 (the unfused program) and at every doubling the memory
    cap and the candidates allow; a later, larger group probes the sizes this one could not."""
    first = tasks[0]
    batch_size = int(params["batch_size"])
    # The compile mode first, on the candidates' work together, so that K=1 and the fused sizes
    # are timed in the one mode the groups will run in.
    trainer.mode_for(architecture_signature(params, trainer.builder), params, first.seed,
                     steps=trainer.job_steps(first, batch_size) * len(tasks))
    batch = trainer.timing_batch(batch_size, first.seed)
    steps = int(batch.shape[0])
    per_trial = dict(earlier.per_trial_ms) if earlier else {}

    def warmed_up(train_steps):
        call = trainer.step_call(train_steps, batch)
        first_call_seconds(call)   # its trace and compile
        return call

    calls = {}
    if 1 not in per_trial:
        calls[1] = warmed_up(trainer.program_for(params, first.seed,
                                                 steps=trainer.job_steps(first, batch_size)).train_steps)
    sizes = probe_sizes(cap, len(tasks))
    for k in sizes:
        if k not in per_trial:
            # Stand-in trials: the first task's configuration under k seeds, no checkpoints.
            stand_ins = [dataclasses.replace(first, seed=first.seed + i, checkpoint_in=None) for i in range(k)]
            program, _, _ = prepare_group(trainer, stand_ins, spare_slots=False)
            calls[k] = warmed_up(program.train_steps)
    for k, seconds in steady_seconds(calls).items():
        per_trial[k] = 1000 * seconds / (k * steps)
    return FuseChoice(smallest_near_best(per_trial), cap, per_trial, settled=max(sizes, default=1) * 2 > cap)


def _fuse_decisions(trainer) -> FuseDecisions:
    if not hasattr(trainer, "_fuse_decisions"):
        trainer._fuse_decisions = FuseDecisions()
    return trainer._fuse_decisions


def _cache(trainer) -> "OrderedDict[tuple, FusedProgram]":
    if not hasattr(trainer, "_fused_programs"):
        trainer._fused_programs = OrderedDict()
    return trainer._fused_programs


def _evaluate(trainer, program: FusedProgram) -> tuple[np.ndarray, np.ndarray]:
    import tensorflow as tf
    n_val = len(trainer.dataset.x_val)
    losses, correct = np.zeros(program.k), np.zeros(program.k)
    with tf.device(trainer.device):
        for first in range(0, n_val, 1024):
            loss, right = program.evaluate(trainer._x_val[first:first + 1024], trainer._y_val[first:first + 1024])
            losses += loss.numpy()
            correct += right.numpy()
    return losses / n_val, correct / n_val
