"""The Dask executor's bookkeeping of shares and free workers, without a cluster: which
worker the next share is sent to after one comes back."""

from hpo.jobs import TrialDone


def executor_with(shares: dict):
    """A DaskExecutor's share bookkeeping alone (`shares`: key -> (trial ids, worker))."""
    from hpo.executors.dask_cluster import DaskExecutor, _Share

    executor = DaskExecutor.__new__(DaskExecutor)
    executor._shares = {key: _Share(future=None, trial_ids=set(ids), worker=worker)
                        for key, (ids, worker) in shares.items()}
    executor._share_of = {trial_id: key for key, (ids, _) in shares.items() for trial_id in ids}
    executor._epochs = {trial_id: 1 for trial_id in executor._share_of}
    executor._cancelled = set()
    executor._free_workers = []
    return executor


def test_a_share_whose_worker_died_never_sends_the_next_share_to_that_address():
    """The scheduler never places a task restricted to a dead worker's address, loosely or
    not: the retry would wait for ever (a worker SIGKILLed mid-trial hung the search). A share
    lost otherwise (a result that would not unpickle) leaves its live worker free."""
    executor = executor_with({"lost": ([0, 1], "tcp://dead:1"), "done": ([2], "tcp://alive:2"),
                              "unreported": ([3], "tcp://alive:3")})
    executor._shares["lost"].worker_died = True
    unreported = executor._on_event(TrialDone(trial_id=3, epochs_trained=0, lost=True, error="not reported"))
    assert unreported.lost and executor._free_workers == ["tcp://alive:3"]
    first = executor._on_event(TrialDone(trial_id=0, epochs_trained=1, lost=True, error="the worker died"))
    second = executor._on_event(TrialDone(trial_id=1, epochs_trained=0, lost=True, error="the worker died"))
    finished = executor._on_event(TrialDone(trial_id=2, epochs_trained=3))
    assert [first.trial_id, second.trial_id, finished.trial_id] == [0, 1, 2]
    assert executor._free_workers == ["tcp://alive:3", "tcp://alive:2"]
    assert executor._shares == {}


def test_the_schedulers_word_on_a_dead_workers_tasks_is_dropped_for_this_run_only():
    """The runner says what a lost trial means (retried or failed); the LocalCluster's own
    ERROR records of the same loss would alarm for nothing. Another run's, or other news, pass."""
    import logging

    from hpo.executors.dask_cluster import _OwnLosses

    own = _OwnLosses("hpo-1a2b3c4d-")

    def passes(message: str) -> bool:
        return own.filter(logging.LogRecord("distributed.scheduler", logging.ERROR, __file__, 1, message, (), None))

    assert not passes("Task hpo-1a2b3c4d-trials-31-9636f7 marked as failed because 1 workers died while trying "
                      "to run it")
    assert not passes("Removing worker 'tcp://127.0.0.1:1' caused the cluster to lose scattered data, which can't "
                      "be recovered: {'hpo-1a2b3c4d-trainer-maker-0e1f2a3b'} (stimulus_id='x')")
    assert passes("Task hpo-99999999-trials-31-9636f7 marked as failed because 1 workers died while trying to run it")
    assert passes("Task hpo-1a2b3c4d-trials-31-9636f7 erred: ZeroDivisionError")
