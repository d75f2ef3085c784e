"""Runs trials in the driver's own process: for tests, debugging and fused trials.

The trainer yields events as it trains, so "running" a trial here means pulling its next
epoch; the runner sees the same event stream a process pool would send. The executor
holds up to `slots` tasks and hands every waiting task to the trainer's one entry point,
`run_group(tasks)` (a plain `Trainer` trains them one by one, a `FusingTrainer` in fused
groups); it groups nothing itself.
"""

from __future__ import annotations

from typing import Callable, Iterator

from hpo.jobs import Event, TrainTask, TrialDone


class InlineExecutor:
    def __init__(self, make_trainer: Callable[[], object], slots: int = 1):
        self._make_trainer = make_trainer
        self._trainer = None
        self.slots = slots
        self._waiting: list[TrainTask] = []
        self._active: list[TrainTask] = []      # handed to the trainer, not yet ended
        self._stream: Iterator[Event] | None = None

    # --- the executor protocol (hpo.jobs) -------------------------------------------------
    def free_slots(self) -> int:
        return self.slots - len(self._waiting) - len(self._active)

    def running(self) -> list[int]:
        return [t.trial_id for t in self._active + self._waiting]

    def idle_workers(self) -> int:
        return 0 if self._active or self._waiting else 1      # one trainer

    def submit(self, task: TrainTask) -> None:
        if self.free_slots() < 1:
            raise RuntimeError("the inline executor has no free slot")
        if self._trainer is None:
            self._trainer = self._make_trainer()
        self._waiting.append(task)

    def has_event(self) -> bool:
        return False                  # every event is this process training: it is waited for

    def next_event(self) -> Event:
        while True:
            if self._stream is None:
                if not self._waiting:
                    raise RuntimeError("no trial is running")
                self._active, self._waiting = self._waiting, []
                self._stream = self._trainer.run_group(list(self._active))
            try:
                event = next(self._stream)
            except StopIteration:
                self._stream, self._active = None, []
                continue
            if isinstance(event, TrialDone):
                self._active = [t for t in self._active if t.trial_id != event.trial_id]
            return event

    def cancel(self, trial_id: int) -> None:
        self._waiting = [t for t in self._waiting if t.trial_id != trial_id]
        if any(t.trial_id == trial_id for t in self._active):
            # The trainer's stream stops as a whole (a fused group cannot lose one member);
            # the others go back to waiting and start again from their progress checkpoints.
            if self._stream is not None:
                self._stream.close()
            self._stream = None
            self._waiting = [t for t in self._active if t.trial_id != trial_id] + self._waiting
            self._active = []

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream, self._active, self._waiting = None, [], []
