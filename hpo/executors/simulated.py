"""Runs a plain Python objective on simulated workers, under a simulated clock.

The objective says what a trial would cost: it returns a dict holding the metric being
optimised and, under `cost_key`, the trial's duration in seconds. The call itself runs at
once, when the trial is submitted; the trial then occupies one of `workers` simulated
workers until the clock reaches its start plus its cost. `next_event` jumps the clock
(`hpo.clock.SimulatedClock`) to the next trial to finish (ties in the order submitted) and
hands back its events, which are the ones `hpo.executors.function.FunctionExecutor` would
send. Nothing sleeps, and everything above the executor is the real driver: the searcher,
the pending jobs and promotions, the study's records (at simulated times) and
`search.time_limit` (in simulated seconds).

With `resumes`, a promotion trains on from its parent's checkpoint, as a Keras trial does:
the objective still returns the cost of training its config from scratch to the budget,
and the trial is charged that less what the config had cost at the epoch it starts from.
Without it each call costs what it returns, as a plain function evaluated from scratch
would.

The executor also keeps what a simulation reports (`report()`): the workers' utilisation
(busy worker-seconds over workers times the simulated time elapsed) and the driver's real
decision times (from handing back a finished trial to the next submit: the time a free
worker would wait on the driver).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any, Mapping

from hpo.clock import SimulatedClock, SimulationReport
from hpo.errors import UserInputError
from hpo.executors.function import Objective, evaluate
from hpo.jobs import EpochDone, Event, TrainTask, TrialDone
from hpo.trial import config_identity


@dataclass
class _Running:
    task: TrainTask
    started: float
    finishes: float
    events: list[Event]


class SimulatedExecutor:
    def __init__(self, objective: Objective, metric: str = "objective", workers: int = 1,
                 clock: SimulatedClock | None = None, cost_key: str = "cost", resumes: bool = False):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.objective = objective
        self.metric = metric
        self.slots = workers
        self.clock = clock if clock is not None else SimulatedClock()
        self.cost_key = cost_key
        self.resumes = resumes
        self._started_at = self.clock()
        self._running: dict[int, _Running] = {}
        self._finishing: list[tuple[float, int, int]] = []     # (finishes, submit order, trial id)
        self._ready: list[Event] = []                         # the finished trial's events, in order
        self._submitted = 0
        self._busy = 0.0
        self._reached: dict[str, dict[int, float]] = {}        # config -> epoch -> cost from scratch
        self._decisions: list[float] = []
        self._handed_done: float | None = None                # real time a TrialDone went back
        self._costed = False                                  # a call has returned its cost

    # --- the executor protocol (hpo.jobs) -------------------------------------------------
    def free_slots(self) -> int:
        return self.slots - len(self._running)

    def idle_workers(self) -> int:
        return self.free_slots()       # a simulated worker per trial

    def running(self) -> list[int]:
        return list(self._running)

    def submit(self, task: TrainTask) -> None:
        self._decided()
        if self.free_slots() < 1:
            raise RuntimeError("no free simulated worker")
        events = evaluate(self.objective, self.metric, task)
        events, cost = self._charged(task, events)
        now = self.clock()
        self._running[task.trial_id] = _Running(task, now, now + cost, events)
        heapq.heappush(self._finishing, (now + cost, self._submitted, task.trial_id))
        self._submitted += 1
        self._busy += cost

    def has_event(self) -> bool:
        # The events of a trial already read, or of one that finishes at this very moment.
        return bool(self._ready) or any(finishes <= self.clock() and self._live(trial_id, finishes)
                                        for finishes, _, trial_id in self._finishing)

    def _live(self, trial_id: int, finishes: float) -> bool:
        run = self._running.get(trial_id)
        return run is not None and run.finishes == finishes

    def next_event(self) -> Event:
        self._decided()
        while not self._ready:
            if not self._finishing:
                raise RuntimeError("no trial is running")
            finishes, _, trial_id = heapq.heappop(self._finishing)
            if not self._live(trial_id, finishes):
                continue                        # cancelled
            self.clock.advance_to(finishes)
            self._ready = list(self._running[trial_id].events)
        event = self._ready.pop(0)
        if isinstance(event, TrialDone):
            del self._running[event.trial_id]
            self._handed_done = time.perf_counter()
        return event

    def cancel(self, trial_id: int) -> None:
        run = self._running.pop(trial_id, None)
        if run is not None:
            self._busy -= max(0.0, run.finishes - self.clock())
            self._ready = [e for e in self._ready if _trial_of(e) != trial_id]

    def close(self) -> None:
        for trial_id in list(self._running):
            self.cancel(trial_id)

    def reached(self, config: Mapping[str, Any], epoch: int, cost: float) -> None:
        """Note that `config` trained from scratch to `epoch` costs `cost` (with `resumes`, a
        promotion from `epoch` is charged the rest): a resumed study's finished trials."""
        self._reached.setdefault(config_identity(config), {})[epoch] = float(cost)

    # --- what a simulation reports --------------------------------------------------------
    def report(self) -> SimulationReport:
        busy = self._busy - sum(max(0.0, r.finishes - self.clock()) for r in self._running.values())
        return SimulationReport(workers=self.slots, simulated_seconds=self.clock() - self._started_at,
                                busy_seconds=busy, trials=self._submitted,
                                decision_seconds=tuple(self._decisions))

    # --- helpers --------------------------------------------------------------------------
    def _charged(self, task: TrainTask, events: list[Event]) -> tuple[list[Event], float]:
        """The trial's events and the simulated seconds it occupies a worker. The first
        successful call without a cost is a setup mistake (UserInputError: every call would
        fail); after a call that returned one, a successful call without a finite,
        positive cost fails its trial (the cost from scratch: a promotion with resumes may still be
        charged nothing beyond its parent). A call that raised costs nothing (it said no
        duration); one that returned a cost is charged it, even where its value fails the
        trial (NaN: the training ran, then diverged)."""
        done = events[-1]
        if not isinstance(done, TrialDone) or done.error is not None:
            return events, 0.0
        metrics = next(e.report.metrics for e in events if isinstance(e, EpochDone))
        cost = metrics.get(self.cost_key)
        if cost is None and not self._costed:
            # A bare number and a dict of the value alone read the same here: both say "only its value".
            returned = (f"only its value ({metrics[self.metric]:g})" if set(metrics) == {self.metric} else
                        "{" + ", ".join(f"{name!r}: {value:g}" for name, value in metrics.items()) + "}")
            raise UserInputError(
                f"a simulated search needs each trial's duration in simulated seconds: the objective must return a "
                f"dict such as {{{self.metric!r}: 0.25, {self.cost_key!r}: 120.0}}, but its first call (trial "
                f"{task.trial_id}) returned {returned}, with no {self.cost_key!r}")
        # A cost of 0 would not move the clock: a search with only a time limit would never end.
        if cost is None or not math.isfinite(cost) or cost <= 0:
            said = "no" if cost is None else f"the cost {cost} as"
            error = (f"the objective returned {said} {self.cost_key!r}; a simulated search needs each "
                     f"trial's duration there, in seconds > 0")
            return [TrialDone(trial_id=task.trial_id, epochs_trained=0, error=error)], 0.0
        self._costed = True
        if not self.resumes:
            return events, float(cost)
        reached = self._reached.setdefault(config_identity(task.config), {})
        reached[task.end_epoch] = float(cost)
        already = reached.get(task.start_epoch, 0.0) if task.start_epoch > 0 else 0.0
        return events, max(0.0, float(cost) - already)

    def _decided(self) -> None:
        if self._handed_done is not None:
            self._decisions.append(time.perf_counter() - self._handed_done)
            self._handed_done = None


def _trial_of(event: Event) -> int | None:
    if isinstance(event, TrialDone):
        return event.trial_id
    if isinstance(event, EpochDone):
        return event.report.trial_id
    return None
