"""What an executor streams back to the runner."""

from __future__ import annotations

from dataclasses import dataclass

from hpo.training.task import EpochReport, TrainTask


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


class SingleSlotExecutor:
    """Bookkeeping shared by the in-process executors: one trial at a time."""

    slots = 1

    def __init__(self) -> None:
        self._task: TrainTask | None = None

    def free_slots(self) -> int:
        return 0 if self._task is not None else 1

    def running(self) -> list[int]:
        return [self._task.trial_id] if self._task is not None else []

    def _claim(self, task: TrainTask) -> None:
        if self._task is not None:
            raise RuntimeError(f"{type(self).__name__} runs one trial at a time")
        self._task = task
