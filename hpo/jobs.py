"""The contract between the runner and whatever trains: tasks out, events back.

The runner hands an executor `TrainTask`s and reads `Event`s back. Nothing here imports
TensorFlow or knows about searchers, so the plain-function path (`hpo.optimize`) and the
Keras path share one contract.

The `Executor` contract, written once here:
- `free_slots()` says how many more tasks `submit` takes now; the runner never submits more.
- `submit(task)` only queues: training happens as the runner pulls `next_event()`.
- `next_event()` blocks until the next event of any running task. Every submitted task ends
  with exactly one `TrialDone` (cancelled ones included, unless `cancel` removed it before it
  started); `EpochDone`s come before it, in epoch order per trial.
- `running()` lists the trial ids submitted and not yet ended.
- `cancel(trial_id)` stops a trial between epochs; `close()` stops everything and frees the
  workers.
- Executors never write the study: measurements workers make for later trials (a compile
  mode) come back as `CompileChoiceMade` events, and the runner records them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Union


@dataclass(frozen=True)
class TrainTask:
    """Train `config` from epoch `start_epoch` (restored from `checkpoint_in`) to `end_epoch`."""

    trial_id: int
    config: Mapping[str, Any]
    start_epoch: int
    end_epoch: int
    seed: int                                     # weights and dropout masks: one stream per config lineage
    checkpoint_out: str
    checkpoint_in: str | None = None
    tensorboard_run: str | None = None            # run folder for this config's curves
    hparams: Mapping[str, Any] = field(default_factory=dict)
    objective: str = "val_loss"                   # written as the hpo/objective scalar
    budget: float | None = None                   # the searcher's budget before rounding to epochs
    # The epoch's batch order is drawn from (data_seed, epoch), shared by every trial of a
    # study: configs are compared on the same stream of batches (common random numbers, so a
    # lucky shuffle does not pick the winner), and fused trials share one input batch.
    data_seed: int = 0
    measures: tuple[str, ...] = ()                # model measures to take after training (hpo.training.model_measures)
    latency_batch: int = 1                        # examples per forward pass for `latency_ms`
    keep_best_epoch: bool = False                 # keep the best epoch's state too (hpo.training.best_epoch)
    maximize: bool = False                        # the objective's direction, for the best epoch


@dataclass(frozen=True)
class EpochReport:
    trial_id: int
    epoch: int                                     # 1-based, counted across continuations
    metrics: Mapping[str, float]
    replayed: bool = False                         # re-sent from a progress checkpoint, not trained again


@dataclass(frozen=True)
class EpochDone:
    report: EpochReport


@dataclass(frozen=True)
class TrialDone:
    trial_id: int
    epochs_trained: int
    error: str | None = None          # None: success
    traceback: str | None = None
    lost: bool = False                # the worker died, not the trial: worth another attempt
    engine: str | None = None         # the engine that trained it ('compiled', 'fit'), where one was chosen
    engine_reason: str | None = None  # why that engine, for the driver's log
    measures: Mapping[str, float] = field(default_factory=dict)   # TrainTask.measures, taken after training


@dataclass(frozen=True)
class CompileChoiceMade:
    """A compile mode a worker chose for an architecture (`compile: auto`), for the study."""
    key: str
    mode: str
    detail: Mapping[str, Any]


Event = Union[EpochDone, TrialDone, CompileChoiceMade]


class Executor(Protocol):
    def free_slots(self) -> int: ...
    # Workers holding no job: a free slot beside none of them is only room in a busy worker's
    # fused group (`training.fuse`), where synchronous brackets wait (`Searcher.ask(fill=True)`).
    def idle_workers(self) -> int: ...
    # The trials submitted whose TrialDone next_event has not yet handed on (decoded or not).
    def running(self) -> list[int]: ...
    def submit(self, task: TrainTask) -> None: ...
    def next_event(self) -> Event: ...
    # Whether next_event would return at once, an event already in hand (a call that has
    # returned, a message already read): past a time limit the runner records those rather
    # than interrupt trials that had finished. False where telling would mean waiting.
    def has_event(self) -> bool: ...
    def cancel(self, trial_id: int) -> None: ...
    def close(self) -> None: ...
