"""What the runner hands the trainer, and what comes back. No searcher concepts here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


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


@dataclass(frozen=True)
class EpochReport:
    trial_id: int
    epoch: int                                     # 1-based, counted across continuations
    metrics: Mapping[str, float]
    replayed: bool = False                         # re-sent from a progress checkpoint, not trained again
