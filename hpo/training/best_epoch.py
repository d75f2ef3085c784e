"""`training.keep_best_epoch`: a trial's model is its best epoch's, as Keras Tuner keeps it.

The epoch loop tracks, per trial, the best value of the objective over the epochs the job
trains (a resumed attempt's replayed epochs count), and whenever an epoch beats it, writes
that trial's state to `trial_NNNN.best.npz` beside its checkpoint, without an fsync (a trial
can improve every epoch); the file is synced once, when the job ends. The final checkpoint is
still the last epoch's, which a promotion continues from; the best-epoch file is what
`hpo best --export` and the tuner's `get_best_models` load.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from hpo.jobs import TrainTask
from hpo.metric_names import beats


def best_epoch_path(checkpoint: str | Path) -> Path:
    """Where the best epoch's state of the trial checkpointed at `checkpoint` is kept."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.stem}.best{checkpoint.suffix}")


class MissingCheckpoint(FileNotFoundError):
    """A finished trial's model has no checkpoint on disk (`path`: its last epoch's, which is
    what it would be read from when it kept no best epoch)."""

    def __init__(self, path: Path):
        super().__init__(f"{path}: the trial's checkpoint is missing")
        self.path = path


def model_checkpoint(checkpoint: str | Path) -> Path:
    """The checkpoint that holds a finished trial's model: its best epoch's when it kept one,
    else its last epoch's; `MissingCheckpoint` when neither is on disk."""
    best = best_epoch_path(checkpoint)
    if best.exists():
        return best
    if not Path(checkpoint).exists():
        raise MissingCheckpoint(Path(checkpoint))
    return Path(checkpoint)


class BestEpochs:
    """Per trial of a group, the best objective so far in its job, for the trials that keep
    their best epoch."""

    def __init__(self, tasks: Sequence[TrainTask], replayed: Sequence[Sequence[tuple[int, Mapping]]]):
        self.tasks = tasks
        self.best: list[float | None] = [None] * len(tasks)
        self._written: set[int] = set()
        for i, reports in enumerate(replayed):
            self.improved_at(i, [metrics for _, metrics in reports])

    def saved(self, trials: Sequence[int]) -> None:
        """`trials` had their best-epoch state written this job."""
        self._written.update(trials)

    def sync(self) -> None:
        """Make this job's best-epoch files durable, as the final checkpoints are."""
        for i in sorted(self._written):
            with open(best_epoch_path(self.tasks[i].checkpoint_out), "rb") as handle:
                os.fsync(handle.fileno())

    @property
    def active(self) -> bool:
        return any(t.keep_best_epoch for t in self.tasks)

    def improved(self, metrics: Sequence[Mapping[str, float]]) -> list[int]:
        """The trials whose objective this epoch (`metrics[i]`) beats their best so far."""
        return [i for i, m in enumerate(metrics) if self.improved_at(i, [m])]

    def improved_at(self, i: int, epochs: Sequence[Mapping[str, float]]) -> bool:
        task, better = self.tasks[i], False
        if not task.keep_best_epoch:
            return False
        for metrics in epochs:
            value = metrics.get(task.objective)
            if beats(value, self.best[i], task.maximize):
                self.best[i], better = float(value), True
        return better

    def objective(self, i: int, last: float) -> float:
        """The value a trial's run records as its objective: its best epoch's when it keeps one."""
        best = self.best[i]
        return last if best is None or not self.tasks[i].keep_best_epoch else best
