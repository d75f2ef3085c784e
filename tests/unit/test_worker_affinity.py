"""A promotion goes to the worker that trained its parent, when that worker is among the least loaded."""

from hpo.executors.affinity import WorkerAffinity
from hpo.executors.local import LocalProcessExecutor, _Worker
from hpo.jobs import TrainTask


def task(trial_id, checkpoint_in=None):
    return TrainTask(trial_id=trial_id, config={}, start_epoch=0 if checkpoint_in is None else 1, end_epoch=3,
                     seed=0, checkpoint_out=f"trial_{trial_id}.npz", checkpoint_in=checkpoint_in)


def submit_only(workers=2, capacity=1):
    """The executor's task placement over workers without processes (submit never touches them)."""
    executor = object.__new__(LocalProcessExecutor)
    executor.capacity, executor.affinity = capacity, WorkerAffinity()
    executor._workers = [_Worker(slot, process=None, inbox=None, events=None, serial=slot + 1)
                         for slot in range(workers)]
    return executor


def finish(executor, trial_id):
    for worker in executor._workers:
        if worker.tasks.pop(trial_id, None) is not None:
            worker.unsent = [t for t in worker.unsent if t.trial_id != trial_id]


def holder(executor, trial_id):
    return next(w.slot for w in executor._workers if trial_id in w.tasks)


def test_a_promotion_follows_its_parent_to_its_worker_when_that_worker_is_free():
    executor = submit_only()
    executor.submit(task(1))
    executor.submit(task(2))
    assert (holder(executor, 1), holder(executor, 2)) == (0, 1)
    finish(executor, 1)
    finish(executor, 2)
    # Both workers free: each promotion goes where its parent trained, whatever the order.
    executor.submit(task(3, checkpoint_in="trial_2.npz"))
    executor.submit(task(4, checkpoint_in="trial_1.npz"))
    assert (holder(executor, 3), holder(executor, 4)) == (1, 0)
    assert (executor.affinity.hits, executor.affinity.misses) == (2, 0)


def test_a_promotion_does_not_wait_for_a_busy_parent_worker_and_its_child_is_remembered():
    executor = submit_only()
    executor.submit(task(1))
    executor.submit(task(2))
    finish(executor, 2)                     # worker 0 still trains trial 1
    executor.submit(task(3, checkpoint_in="trial_1.npz"))
    assert holder(executor, 3) == 1 and executor.affinity.misses == 1
    finish(executor, 1)
    finish(executor, 3)
    executor.submit(task(5))                # a new config: the first least-loaded worker
    executor.submit(task(4, checkpoint_in="trial_3.npz"))   # trial 3's own promotion: worker 1
    assert (holder(executor, 5), holder(executor, 4)) == (0, 1)


def test_load_comes_before_affinity_for_workers_holding_several_trials():
    executor = submit_only(capacity=4)
    executor.submit(task(1))
    executor.submit(task(2))
    executor.submit(task(3))                # worker 0 now holds two
    finish(executor, 2)                     # worker 1 holds none
    executor.submit(task(4, checkpoint_in="trial_1.npz"))
    assert holder(executor, 4) == 1


def test_a_replaced_worker_is_forgotten():
    affinity = WorkerAffinity(remembered=2)
    affinity.wrote("a.npz", 1)
    affinity.wrote("b.npz", 2)
    affinity.wrote("c.npz", 1)              # the oldest, a.npz, is dropped
    assert affinity.choose([1, 2], [0, 0], "a.npz") == 1 and affinity.misses == 1
    assert affinity.choose([1, 2], [0, 0], "b.npz") == 2 and affinity.hits == 1
    affinity.forget(2)
    assert affinity.choose([1, 2], [0, 0], "b.npz") == 1
