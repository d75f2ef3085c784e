"""What an executor streams back to the runner."""

from __future__ import annotations

from dataclasses import dataclass

from hpo.training.task import EpochReport


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


Event = EpochDone | TrialDone
