"""The function executor (hpo.optimize's calls in a thread pool) says whether an event is in
hand: what the runner reads past a time limit rather than interrupt a call that returned."""

import threading
import time

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
