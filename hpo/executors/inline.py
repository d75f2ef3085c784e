"""Runs trials in the driver's own process: for tests, debugging and fused trials.

The trainer is a generator, so "running" a trial here means pulling its next epoch;
the runner sees the same event stream a process pool would send.

With `training.fuse` > 1 the executor takes up to that many tasks at once (`auto`: up to
32, fused in groups whose size is measured per architecture, `hpo.training.fuse_size`),
and tasks that share an architecture, batch size and epoch range train together as one fused program
(`hpo.training.fused_trainer`); their per-epoch reports and ends stream back as if each had
run alone. A group that cannot train fused (an unsupported layer, a diverging member, any
error) reruns its tasks one by one, so one bad configuration cannot sink the others.
"""

from __future__ import annotations

import logging
import traceback
from typing import Callable, Iterator

from hpo.executors.base import EpochDone, Event, TrialDone
from hpo.training.task import TrainTask

log = logging.getLogger("hpo.executors")


class InlineExecutor:
    def __init__(self, make_trainer: Callable[[], object], fuse: int | str = 1):
        from hpo.training.fuse_size import jobs_in_flight

        self._make_trainer = make_trainer
        self._trainer = None
        self._auto_fuse = fuse == "auto"
        self.slots = jobs_in_flight(fuse)
        self._waiting: list[TrainTask] = []
        self._active: list[TrainTask] = []
        self._stream: Iterator[Event] | None = None

    # --- the executor protocol ----------------------------------------------------------
    def free_slots(self) -> int:
        return self.slots - len(self._waiting) - len(self._active)

    def running(self) -> list[int]:
        return [t.trial_id for t in self._active + self._waiting]

    def submit(self, task: TrainTask) -> None:
        if self.free_slots() < 1:
            raise RuntimeError("the inline executor has no free slot")
        if self._trainer is None:
            self._trainer = self._make_trainer()
        self._waiting.append(task)

    def next_event(self) -> Event:
        while True:
            if self._stream is None:
                if not self._waiting:
                    raise RuntimeError("no trial is running")
                self._stream = self._start_next()
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
            # A fused group stops as a whole; the runner cancels every running trial when it stops.
            if self._stream is not None:
                self._stream.close()
            self._stream = None
            self._waiting = [t for t in self._active if t.trial_id != trial_id] + self._waiting
            self._active = []

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._stream, self._active, self._waiting = None, [], []

    # --- scheduling -----------------------------------------------------------------------
    def _start_next(self) -> Iterator[Event]:
        group = self._take_group()
        self._active = list(group)
        if len(group) == 1:
            return self._unfused(group[0])
        return self._fused(group)

    def _take_group(self) -> list[TrainTask]:
        first = self._waiting[0]
        if self.slots == 1:
            self._waiting.pop(0)
            return [first]
        from hpo.training.fused_trainer import group_key, group_size
        try:
            key = group_key(self._trainer, first)
            group = [t for t in self._waiting if group_key(self._trainer, t) == key]
            if self._auto_fuse and len(group) > 1:
                group = group[:group_size(self._trainer, group)]
        except Exception:   # noqa: BLE001 - a config the trainer cannot even resolve fails on its own
            group = [first]
        self._waiting = [t for t in self._waiting if t not in group]
        return group

    def _unfused(self, task: TrainTask) -> Iterator[Event]:
        trained = 0
        epochs = self._trainer.run(task)
        try:
            for report in epochs:
                trained += not report.replayed
                yield EpochDone(report)
        except Exception as exc:  # a failed trial is data for the study, not a crash
            yield TrialDone(trial_id=task.trial_id, epochs_trained=trained, error=f"{type(exc).__name__}: {exc}",
                            traceback=traceback.format_exc())
            return
        finally:
            epochs.close()
        yield TrialDone(trial_id=task.trial_id, epochs_trained=trained)

    def _fused(self, group: list[TrainTask]) -> Iterator[Event]:
        from hpo.training.fused_trainer import FusedGroupFailed, train_fused
        trained = 0
        try:
            for reports in train_fused(self._trainer, group):
                trained += not reports[0].replayed
                for report in reports:
                    yield EpochDone(report)
        except FusedGroupFailed as exc:
            log.info("fused group of trials %s ran unfused instead: %s", [t.trial_id for t in group], exc)
            for task in group:
                yield from self._unfused(task)
            return
        log.debug("trials %s trained fused", [t.trial_id for t in group])
        for task in group:
            yield TrialDone(trial_id=task.trial_id, epochs_trained=trained)
