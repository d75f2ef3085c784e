"""The function executor (hpo.optimize's calls in a thread pool) says whether an event is in
hand: what the runner reads past a time limit rather than interrupt a call that returned."""

import threading
import time

import pytest

from hpo.executors.function import FunctionExecutor
from hpo.jobs import TrainTask, TrialDone


def task(trial_id: int) -> TrainTask:
    return TrainTask(trial_id=trial_id, config={"x": float(trial_id)}, start_epoch=0, end_epoch=1, seed=0,
                     checkpoint_out="")


def wait_for(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_has_event_is_true_exactly_when_a_returned_call_waits_to_be_read():
    release = threading.Event()

    def objective(config, budget):
        if config["x"] > 0:             # trials 1 and 2 return only once released
            release.wait(timeout=30)
        return config["x"]
    executor = FunctionExecutor(objective, workers=3)
    try:
        for trial_id in range(3):
            executor.submit(task(trial_id))
        wait_for(executor.has_event)                     # trial 0 returned
        while not isinstance(event := executor.next_event(), TrialDone):
            pass
        assert event.trial_id == 0 and not executor.has_event()     # 1 and 2 still running
        executor.cancel(1)                               # its result, when it comes, is no event
        release.set()
        wait_for(executor.has_event)                     # trial 2 returned
        read = set()
        while executor.has_event():
            event = executor.next_event()
            if isinstance(event, TrialDone):
                read.add(event.trial_id)
        assert read == {2} and executor.running() == []
    finally:
        release.set()
        executor.close()


def objective_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("hpo-objective")]


def test_the_pool_starts_its_daemon_threads_with_the_first_call_and_close_ends_them():
    before = set(objective_threads())
    executor = FunctionExecutor(lambda config, budget: config["x"], workers=3)
    assert set(objective_threads()) == before           # built, refused before any trial: no thread
    executor.close()
    release = threading.Event()
    started = []

    def slow(config, budget):
        started.append(config["x"])
        release.wait(timeout=30)
        if config["x"] == 1:
            raise ValueError("the objective's own error")
        return config["x"]
    executor = FunctionExecutor(slow, workers=2)
    try:
        for trial_id in range(2):
            executor.submit(task(trial_id))
        new = set(objective_threads()) - before
        assert len(new) == 2 and all(t.daemon for t in new)     # they never hold the process open
        wait_for(lambda: len(started) == 2)
        release.set()
        done = {}
        while len(done) < 2:
            event = executor.next_event()
            if isinstance(event, TrialDone):
                done[event.trial_id] = event
        assert done[0].error is None and "ValueError: the objective's own error" in done[1].error
    finally:
        release.set()
        executor.close()
    wait_for(lambda: not any(t.is_alive() for t in new))


def test_close_cancels_the_calls_not_started_and_a_closed_pool_takes_none():
    release = threading.Event()
    ran = []

    def slow(config, budget):
        ran.append(config["x"])
        release.wait(timeout=30)
        return config["x"]
    executor = FunctionExecutor(slow, workers=2)
    pool = executor._pool
    executor.submit(task(0))
    executor.submit(task(1))
    wait_for(lambda: len(ran) == 2)
    queued = pool.submit(slow, {"x": 9.0}, 1.0)          # waits for a free thread
    executor._futures[queued] = 9
    executor.close()
    release.set()
    assert queued.cancelled()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(slow, {"x": 10.0}, 1.0)
    wait_for(lambda: not any(t.is_alive() for t in pool._threads))
    assert sorted(ran) == [0.0, 1.0]                     # the queued call never ran
