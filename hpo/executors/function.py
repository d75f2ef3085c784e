"""Runs a plain Python objective `objective(config, budget) -> float | dict` in-process.

For `hpo.optimize` and for tests of the search machinery without TensorFlow. A dict result
must hold the metric being optimised; a float is taken as that metric itself.

With one worker the objective runs in the driver's thread, so a run is exactly repeatable
and a debugger stops where you expect. With several, trials run in a thread pool: that
suits objectives that release the GIL (numpy, TensorFlow, scikit-learn with n_jobs, I/O,
subprocesses). Its threads are daemons: Ctrl-C ends a script as soon as the study is safe,
where a `ThreadPoolExecutor`'s would be joined at exit, each running call finished first
only for its result to be dropped.
"""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import threading
import traceback
from typing import Any, Callable, Mapping

from hpo.jobs import EpochDone, EpochReport, Event, TrainTask, TrialDone
from hpo.trial import is_number

Objective = Callable[[Mapping[str, Any], float], Any]


def evaluate(objective: Objective, metric: str, task: TrainTask) -> list[Event]:
    """The events one call of the objective produces: its metrics, then the trial's end."""
    budget = task.budget if task.budget is not None else float(task.end_epoch)
    try:
        value = objective(dict(task.config), budget)
        if isinstance(value, Mapping):
            metrics = {str(k): _number(v, str(k)) for k, v in value.items()}
        else:
            metrics = {metric: _number(value, metric)}
    except Exception as exc:  # the objective's failure is the trial's, not the search's
        return [TrialDone(trial_id=task.trial_id, epochs_trained=0, error=f"{type(exc).__name__}: {exc}",
                          traceback=traceback.format_exc())]
    trained = task.end_epoch - task.start_epoch
    return [EpochDone(EpochReport(trial_id=task.trial_id, epoch=task.end_epoch, metrics=metrics)),
            TrialDone(trial_id=task.trial_id, epochs_trained=trained)]


def _number(value: Any, name: str) -> float:
    """A returned value as a float: a number, or anything numbers convert from (a numpy or
    TensorFlow scalar). Text and booleans are the objective's mistake, which `float` would
    quietly accept ("0.5", True)."""
    if not is_number(value):
        raise TypeError(f"the objective returned {type(value).__name__} {value!r} for {name!r}; "
                        f"expected a number (or a dict of numbers)")
    return float(value)


class _DaemonThreadPool:
    """`submit` -> a `concurrent.futures.Future`, run by one of `workers` daemon threads,
    started by the first `submit` (a search refused before its first trial starts none)."""

    def __init__(self, workers: int, name: str):
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._workers, self._name = workers, name
        self._threads: list[threading.Thread] = []
        self._shut = False

    def submit(self, function: Callable, *args: Any) -> concurrent.futures.Future:
        if self._shut:
            raise RuntimeError("this pool was shut down")
        if not self._threads:
            self._threads = [threading.Thread(target=self._work, name=f"{self._name}_{i}", daemon=True)
                             for i in range(self._workers)]
            for thread in self._threads:
                thread.start()
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put((future, function, args))
        return future

    def _work(self) -> None:
        while (item := self._inbox.get()) is not None:
            future, function, args = item
            if not future.set_running_or_notify_cancel():      # cancelled before it started
                continue
            try:
                future.set_result(function(*args))
            except BaseException as exc:    # noqa: BLE001 - handed to whoever waits on it
                future.set_exception(exc)

    def shutdown(self) -> None:
        """The threads end once their running call returns; nothing waits for them."""
        self._shut = True
        for _ in self._threads:
            self._inbox.put(None)


class FunctionExecutor:
    def __init__(self, objective: Objective, metric: str = "objective", workers: int = 1):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.objective = objective
        self.metric = metric
        self.slots = workers
        self._pool = _DaemonThreadPool(workers, "hpo-objective") if workers > 1 else None
        self._tasks: dict[int, TrainTask] = {}
        self._futures: dict[concurrent.futures.Future, int] = {}
        self._ready: collections.deque[Event] = collections.deque()

    def free_slots(self) -> int:
        return self.slots - len(self._tasks)

    def idle_workers(self) -> int:
        return self.free_slots()       # a thread per call

    def running(self) -> list[int]:
        return list(self._tasks)

    def submit(self, task: TrainTask) -> None:
        if self.free_slots() < 1:
            raise RuntimeError("no free slot")
        self._tasks[task.trial_id] = task
        if self._pool is not None:
            self._futures[self._pool.submit(evaluate, self.objective, self.metric, task)] = task.trial_id

    def has_event(self) -> bool:
        live = any(isinstance(e, TrialDone) and e.trial_id in self._tasks or
                   isinstance(e, EpochDone) and e.report.trial_id in self._tasks for e in self._ready)
        return live or any(future.done() and self._futures[future] in self._tasks for future in self._futures)

    def next_event(self) -> Event:
        while True:
            if self._ready:
                event = self._ready.popleft()
                if isinstance(event, TrialDone):
                    if self._tasks.pop(event.trial_id, None) is None:
                        continue                # cancelled while it ran
                elif event.report.trial_id not in self._tasks:
                    continue
                return event
            if self._pool is None:
                trial_id = next(iter(self._tasks))
                self._ready.extend(evaluate(self.objective, self.metric, self._tasks[trial_id]))
                continue
            done, _ = concurrent.futures.wait(list(self._futures), return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                self._futures.pop(future)
                self._ready.extend(future.result())

    def cancel(self, trial_id: int) -> None:
        # A running call cannot be stopped; its result is dropped when it arrives.
        self._tasks.pop(trial_id, None)
        for future, owner in list(self._futures.items()):
            if owner == trial_id and future.cancel():
                self._futures.pop(future)

    def close(self) -> None:
        self._tasks.clear()
        if self._pool is not None:
            for future in self._futures:
                future.cancel()             # the calls not started yet never start
            self._pool.shutdown()
