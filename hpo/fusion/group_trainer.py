"""Fused trials behind one seam: `FusingTrainer.run_group(tasks)`.

A `FusingTrainer` wraps a `Trainer`, used through its public seam (`hpo.training.seam`),
and owns everything fusion keeps between groups (its programs and its group-size decisions).
It splits the tasks it is handed into groups that can fuse (one architecture, batch size,
epoch range and data seed), sizes each group (`training.fuse`, or measured under `auto`:
`group_size.py`), and trains each through the trainer's own epoch loop
(`hpo.training.epoch_loop`), so every task's reports, checkpoint and TensorBoard run are
what its unfused training would leave. A group that fails for any reason reruns its tasks
unfused, so one bad configuration cannot sink the others.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Mapping, Sequence

import numpy as np

from hpo.config import FUSE_AUTO_CEILING
from hpo.fusion.group_size import (
    MIN_STEPS_TO_PROBE,
    FuseChoice,
    FuseDecisions,
    bytes_per_trial,
    free_memory,
    memory_cap,
    probe_sizes,
    provisional_k,
    smallest_near_best,
)
from hpo.fusion.program import FusedProgram, fusable, unfusable_measures
from hpo.fusion.spare_slots import CallTimes, best_spare_program
from hpo.jobs import EpochDone, Event, TrainTask, TrialDone
from hpo.training.best_epoch import best_epoch_path
from hpo.training.call_timing import first_call_seconds, steady_seconds
from hpo.training.checkpoint import load_checkpoint, save_arrays
from hpo.training.epoch_loop import train_epochs
from hpo.training.optimizers import TunableOptimizer
from hpo.training.program import architecture_signature
from hpo.training.program_cache import DEFAULT_BUDGET_BYTES, ProgramCache, variable_bytes
from hpo.training.seam import TrainerSeam
from hpo.training.single_trial import resume_point
from hpo.training.xla_fusion import single_pass_update

log = logging.getLogger("hpo.train")

# Fused programs hold K models' variables each: fewer than the unfused cache, the same byte bound.
CACHE_CAPACITY = 8


class FusedGroupFailed(RuntimeError):
    """The group could not train fused; run its tasks unfused."""


def group_key(trainer: TrainerSeam, task: TrainTask) -> tuple:
    """Tasks with equal keys can fuse: one traced graph, one batch size, the same epochs and
    the same batches (one data seed)."""
    params = trainer.resolve(task.config)
    return (architecture_signature(params, trainer.context.builder), int(params["batch_size"]), task.start_epoch,
            task.end_epoch, task.data_seed)


class FusingTrainer:
    """`Trainer.run_group` with fusion: `fuse` is `training.fuse` (a group size, or 'auto')."""

    def __init__(self, trainer: TrainerSeam, fuse: int | str):
        self.trainer = trainer
        self.fuse = fuse
        self.decisions = FuseDecisions()
        self.programs = ProgramCache(CACHE_CAPACITY, DEFAULT_BUDGET_BYTES, measure=fused_program_bytes)
        # A loss or metric the fused step does not compute, streamed data or inputs of several
        # arrays (the fused step gathers batches from one in-memory array): every trial trains unfused.
        self.refusal = unfusable_measures(trainer.context.training) or (
            "the training data is streamed by tf.data; fused trials gather their batches from in-memory arrays"
            if trainer.context.data.streamed else
            "the inputs hold several arrays; fused trials gather their batches from one array"
            if trainer.context.data.several_inputs else None)
        if self.refusal is not None:
            log.info("trials train unfused: %s", self.refusal)

    @property
    def compile_choices(self):
        return self.trainer.compile_choices

    def run_group(self, tasks: Sequence[TrainTask]) -> Iterator[Event]:
        waiting = list(tasks)
        while waiting:
            group = self._take_group(waiting)
            waiting = [t for t in waiting if t not in group]
            events = self.trainer.run_group(group) if len(group) == 1 else self._fused_or_not(group)
            for event in events:
                yield from self.trainer.new_compile_choices()
                yield event

    def _take_group(self, waiting: list[TrainTask]) -> list[TrainTask]:
        first = waiting[0]
        if self.refusal is not None:
            return [first]
        try:
            key = group_key(self.trainer, first)
            group = [t for t in waiting if group_key(self.trainer, t) == key]
            if self.fuse == "auto" and len(group) > 1:
                group = group[:group_size(self, group)]
            else:
                group = group[:max(1, int(self.fuse) if self.fuse != "auto" else FUSE_AUTO_CEILING)]
        except Exception:   # noqa: BLE001 - a config the trainer cannot even resolve fails on its own
            group = [first]
        return group

    def _fused_or_not(self, group: list[TrainTask]) -> Iterator[Event]:
        trained = 0
        try:
            for reports in train_fused(self, group):
                trained += not reports[0].replayed
                for report in reports:
                    yield EpochDone(report)
        except FusedGroupFailed as exc:
            log.info("fused group of trials %s ran unfused instead: %s", [t.trial_id for t in group], exc)
            yield from self.trainer.run_group(group)
            return
        log.debug("trials %s trained fused", [t.trial_id for t in group])
        for task in group:
            try:
                measures = self.trainer.measure(task)
            except Exception as exc:   # noqa: BLE001 - that trial fails; its group's others do not
                yield TrialDone(trial_id=task.trial_id, epochs_trained=trained,
                                error=f"measuring the model failed: {type(exc).__name__}: {exc}")
                continue
            yield TrialDone(trial_id=task.trial_id, epochs_trained=trained, measures=measures)


class FusedGroup:
    """K tasks in a fused program, for the epoch loop; slots past K (spare) are ignored."""

    def __init__(self, program: FusedProgram, tasks: Sequence[TrainTask], params: Sequence[Mapping], scratch):
        self.program, self.tasks, self.scratch = program, list(tasks), scratch
        self.k = len(self.tasks)
        self._rates = [float(p["learning_rate"]) for p in params[:self.k]]
        self.extra_metrics = {"fused_trials": float(self.k)}
        self.reset_metrics()

    def reset_metrics(self) -> None:
        # Fused programs compute the default metric, accuracy, as counts of correct predictions.
        self._correct = {False: np.zeros(self.k), True: np.zeros(self.k)}
        self._seen = {False: 0, True: 0}

    def train_steps(self, batch_indices) -> np.ndarray:
        started = time.perf_counter()
        loss, correct = self.program.train_steps(batch_indices)
        loss, correct = loss.numpy()[:self.k], correct.numpy()[:self.k]
        self.program.call_times.record(int(batch_indices.shape[0]), time.perf_counter() - started)
        self._correct[False] += correct
        self._seen[False] += int(batch_indices.shape[0]) * int(batch_indices.shape[1])
        return loss

    def evaluate(self, x, y) -> np.ndarray:
        loss, correct = self.program.evaluate(x, y)
        self._correct[True] += correct.numpy()[:self.k]
        self._seen[True] += int(x.shape[0])
        return loss.numpy()[:self.k]

    def metric_results(self, validation: bool) -> list[dict[str, float]]:
        seen = max(1, self._seen[validation])
        return [{"accuracy": float(c) / seen} for c in self._correct[validation]]

    def learning_rates(self) -> list[float]:
        return list(self._rates)

    def save(self, epoch: int, durable: bool, reports) -> None:
        _save_all(self.program, self.scratch, self.tasks, epoch, durable, reports)

    def save_best(self, trials, epoch: int) -> None:
        _save_all(self.program, self.scratch, self.tasks, epoch, durable=False, trials=trials, best=True)


def train_fused(fusing: FusingTrainer, tasks: Sequence[TrainTask]) -> Iterator[list]:
    """Train `tasks` (one group key) as one fused program; any failure is `FusedGroupFailed`."""
    job_started = time.perf_counter()
    # An earlier attempt's progress checkpoints (a killed worker or driver): a group that
    # wrote them together resumes together; one torn mid-write has no common start
    # epoch, and its tasks resume one by one through the unfused fallback.
    resumed = [resume_point(t) for t in tasks]
    replays = [r is not t and r.checkpoint_in == t.checkpoint_out for r, t in zip(resumed, tasks)]
    tasks = resumed
    try:
        program, params, scratch = prepare_group(fusing, tasks)
        group = FusedGroup(program, tasks, params, scratch)
        yield from train_epochs(fusing.trainer.context, group, int(params[0]["batch_size"]), replays, job_started)
    except (FusedGroupFailed, GeneratorExit):
        raise
    except Exception as exc:   # noqa: BLE001 - the caller retries unfused
        raise FusedGroupFailed(f"{type(exc).__name__}: {exc}") from exc


def _save_all(program: FusedProgram, scratch, tasks: Sequence[TrainTask], epoch: int,
              durable: bool = True, reports: Sequence[list] | None = None,
              trials: Sequence[int] | None = None, best: bool = False) -> None:
    """Every trial's checkpoint (or `trials`' only), in the unfused layout, from one host copy
    of the state; `best`: to their best-epoch files instead (`hpo.training.best_epoch`)."""
    trial_arrays = program.checkpoint_arrays(*scratch)
    which = list(range(len(tasks))) if trials is None else list(trials)
    contents = {i: trial_arrays(i) for i in which}

    def write(i: int) -> None:
        path = best_epoch_path(tasks[i].checkpoint_out) if best else tasks[i].checkpoint_out
        save_arrays(path, *contents[i], epoch, durable, reports[i] if reports else ())

    # Writes and fsyncs release the GIL, so a few threads overlap them.
    if len(which) == 1:
        write(which[0])
        return
    with ThreadPoolExecutor(max_workers=min(4, len(which))) as pool:
        list(pool.map(write, which))


def fused_program_bytes(program: FusedProgram) -> int:
    """The bytes of a fused program's variables: its K stacked models, its optimizer's state
    and its scratch model and optimizer."""
    variables = program.stacked_variables + list(program.optimizer.state)
    scratch = getattr(program, "scratch", None)
    if scratch is not None:
        model, optimizer = scratch
        variables += list(model.variables) + list(optimizer.optimizer.variables)
    return sum(variable_bytes(v) for v in variables)


def prepare_group(fusing: FusingTrainer, tasks: Sequence[TrainTask], spare_slots: bool = True):
    """The group's fused program (cached per architecture, K, device and mode) with every task's
    fresh or checkpointed state loaded -> (program, resolved params, scratch model and optimizer).
    With `spare_slots`, a bigger cached program may take the group, its first len(tasks) slots
    the tasks', when its measurements say that is cheaper than compiling one (spare_slots.py)."""
    import tensorflow as tf

    trainer = fusing.trainer
    context = trainer.context
    keys = {group_key(trainer, t) for t in tasks}
    if len(keys) != 1:
        raise FusedGroupFailed("the tasks do not share an architecture, batch size, epochs and data seed")
    params = [trainer.resolve(t.config) for t in tasks]
    signature = architecture_signature(params[0], context.builder)
    # The group's work together decides whether measuring the modes pays, as one job's does.
    batch_size = int(params[0]["batch_size"])
    mode = trainer.mode_for(signature, params[0], tasks[0].seed,
                            steps=sum(trainer.job_steps(t, batch_size) for t in tasks))
    cache = fusing.programs
    key = (signature, len(tasks), context.device, mode)
    program = cache.get(key)
    values = [trainer.fresh_weights(p, t.seed) for p, t in zip(params, tasks)]
    if program is None and spare_slots:
        candidates = [(slots, cached.call_times, cached) for (sig, slots, device, cached_mode), cached in cache.items()
                      if (sig, device, cached_mode) == (signature, context.device, mode)]
        program = best_spare_program(len(tasks), trainer.job_steps(tasks[0], batch_size), candidates)
        if program is not None:
            # The spare slots train a copy of the first task, whose results are dropped.
            spare = program.k - len(tasks)
            log.debug("trials %s train in a %d-trial fused program, %d slots spare", [t.trial_id for t in tasks],
                      program.k, spare)
            key = (signature, program.k, context.device, mode)
            tasks, params, values = (list(x) + [x[0]] * spare for x in (tasks, params, values))
    with tf.device(context.device):
        if program is None:
            # One live model of the architecture: the structure to fuse, and the scratch model
            # checkpoints go in and out through (every group of this architecture reuses it).
            template = trainer.build_model(params[0], tasks[0].seed)
            reason = fusable(template, params[0])
            if reason is not None:
                raise FusedGroupFailed(reason)
            program = FusedProgram(template, values, params, context.data.x_train, context.data.y_train, mode,
                                   single_pass_update(mode, context.device), context.device)
            program.scratch = (template, TunableOptimizer(params[0], template.trainable_variables))
            program.call_times = CallTimes()
            cache.put(key, program)
        else:
            cache.mark_used(key)
            program.reset(values, params)
        scratch_model, scratch_optimizer = program.scratch
        for i, task in enumerate(tasks):
            if task.checkpoint_in:
                load_checkpoint(task.checkpoint_in, scratch_model, scratch_optimizer.optimizer)
                program.import_trial(i, scratch_model, scratch_optimizer.optimizer)
    return program, params, (scratch_model, scratch_optimizer)


def group_size(fusing: FusingTrainer, tasks: Sequence[TrainTask]) -> int:
    """`fuse: auto`: how many of `tasks` (one group key) to fuse, decided once per architecture
    and device from free memory and a measured probe (`hpo.fusion.group_size`)."""
    trainer = fusing.trainer
    context = trainer.context
    params = trainer.resolve(tasks[0].config)
    batch_size = int(params["batch_size"])
    key = (architecture_signature(params, context.builder), batch_size, context.device)
    decisions = fusing.decisions
    choice = decisions.choices.get(key)
    if choice is not None and (choice.settled or len(tasks) <= choice.k):
        return choice.k
    caps = decisions.memory_caps
    if key not in caps:
        template = trainer.build_model(params, tasks[0].seed)
        fits = fusable(template, params) is None
        caps[key] = memory_cap(bytes_per_trial(template, batch_size), free_memory(context.device)) if fits else 1
        decisions.provisional[key] = provisional_k(template, context.device)
    cap = caps[key]
    if cap == 1:
        return 1
    if choice is None and trainer.job_steps(tasks[0], batch_size) * len(tasks) < MIN_STEPS_TO_PROBE:
        return min(cap, decisions.provisional[key])   # too little work to repay a probe; a longer group measures
    choice = _probe(fusing, tasks, params, cap, choice)
    decisions.choices[key] = choice
    log.info("fused trials, %s", choice.describe())
    return choice.k


def _probe(fusing: FusingTrainer, tasks: Sequence[TrainTask], params: dict, cap: int,
           earlier: FuseChoice | None) -> FuseChoice:
    """Time a training call at K = 1 (the unfused program) and at every doubling the memory
    cap and the candidates allow; a later, larger group probes the sizes this one could not."""
    trainer = fusing.trainer
    context = trainer.context
    first = tasks[0]
    batch_size = int(params["batch_size"])
    # The compile mode first, on the candidates' work together, so that K=1 and the fused sizes
    # are timed in the one mode the groups will run in.
    trainer.mode_for(architecture_signature(params, context.builder), params, first.seed,
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
            program, _, _ = prepare_group(fusing, stand_ins, spare_slots=False)
            calls[k] = warmed_up(program.train_steps)
    for k, seconds in steady_seconds(calls).items():
        per_trial[k] = 1000 * seconds / (k * steps)
    return FuseChoice(smallest_near_best(per_trial), cap, per_trial, settled=max(sizes, default=1) * 2 > cap)
