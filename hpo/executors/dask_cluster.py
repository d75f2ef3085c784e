"""Trials on a Dask cluster: a LocalCluster on this machine, or a running scheduler.

Each trial is one Dask task (`pure=False`: the same config twice is two trainings). The task
streams its per-epoch reports through a `distributed.Queue`, so the driver records epochs
and makes rung decisions as they happen, and it checks a `distributed.Event` between
epochs so the driver can stop it. A worker process keeps one Trainer per experiment, so its
compiled programs and on-device data serve every trial it runs.

The driver stays the only writer of the study database; workers write checkpoints and
TensorBoard runs into the study folder, which must be shared storage on a cluster. Compile
decisions (`compile: auto`) stay in each worker's memory rather than in SQLite, which
should not be written over a network filesystem.

Worker deaths: on the LocalCluster we start, the scheduler gives up on a task at the first
lost worker (`allowed-failures: 0`), so the runner sees the loss, counts the attempt and
retries from the trial's progress checkpoint. A remote scheduler keeps its own policy: it
reruns lost tasks itself (they also resume from the progress checkpoint) and the runner
only hears of it when the scheduler gives up.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import traceback
import uuid
from pathlib import Path

from hpo.executors.base import EpochDone, Event, TrialDone
from hpo.training.task import EpochReport, TrainTask

log = logging.getLogger("hpo.executors")

POLL_SECONDS = 0.5


class DaskExecutor:
    def __init__(self, experiment, study_dir: str | Path, workers: int | None, scheduler: str | None = None):
        import dask
        from distributed import Client, LocalCluster, Queue

        self.experiment = experiment
        self.study_dir = str(study_dir)
        self._cluster = None
        if scheduler:
            self.client = Client(scheduler, timeout="30s")
            log.info("joined the Dask scheduler at %s", scheduler)
        else:
            workers = workers or 1
            threads = str(max(1, (os.cpu_count() or 1) // workers))
            # Dask pins OpenMP/MKL to one thread per worker process; TensorFlow's CPU kernels
            # (oneDNN) use OpenMP, so a worker owning two cores would run at half speed.
            environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}),
                       "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads}
            with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                                  "distributed.nanny.pre-spawn-environ": environ}):
                # Loopback only: nothing outside this machine can reach the cluster.
                self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                             host="127.0.0.1", dashboard_address=None,
                                             silence_logs=logging.ERROR)
            self.client = Client(self._cluster)
            log.info("started a Dask LocalCluster of %d worker processes", workers)
        info = self.client.scheduler_info()["workers"]
        self._gpu_resources = any("GPU" in w.get("resources", {}) for w in info.values())
        self.slots = workers or max(1, sum(w.get("nthreads", 1) for w in info.values()))
        self._threads = max(1, (os.cpu_count() or 1) // self.slots) if self._cluster is not None else 0
        self._run = uuid.uuid4().hex[:8]
        self._events = Queue(f"hpo-{self._run}-events", client=self.client)
        self._futures: dict[int, object] = {}
        self._cancelled: set[int] = set()
        self._buffer: collections.deque[Event] = collections.deque()

    # --- the executor protocol ----------------------------------------------------------
    def free_slots(self) -> int:
        return max(0, self.slots - len(self._futures))

    def running(self) -> list[int]:
        return [trial_id for trial_id in self._futures if trial_id not in self._cancelled]

    def submit(self, task: TrainTask) -> None:
        resources = {"GPU": 1} if self._gpu_resources else None
        self._futures[task.trial_id] = self.client.submit(
            train_on_worker, self.experiment, task, self._events.name, self._cancel_name(task.trial_id),
            self._threads, pure=False, resources=resources,
            key=f"hpo-{self._run}-trial-{task.trial_id}-{uuid.uuid4().hex[:6]}")

    def next_event(self) -> Event:
        while True:
            while self._buffer:
                event = self._buffer.popleft()
                trial_id = event.report.trial_id if isinstance(event, EpochDone) else event.trial_id
                if isinstance(event, TrialDone):
                    self._futures.pop(trial_id, None)
                if trial_id not in self._cancelled:
                    return event
                if isinstance(event, TrialDone):
                    self._cancelled.discard(trial_id)
            # A task's last message is its TrialDone, so the queue alone normally carries the
            # whole trial; a future that ends without one lost its worker (or was cancelled).
            self._take_queued(batch=False)
            if self._buffer:
                continue
            ended = [trial_id for trial_id, future in self._futures.items() if future.done()]
            if ended:
                self._take_queued(batch=True)      # anything it sent before it ended comes first
                reported = {e.trial_id for e in self._buffer if isinstance(e, TrialDone)}
                for trial_id in ended:
                    if trial_id not in reported:
                        self._buffer.append(self._outcome(trial_id, self._futures[trial_id]))

    def cancel(self, trial_id: int) -> None:
        from distributed import Event as DaskEvent
        future = self._futures.get(trial_id)
        if future is None:
            return
        self._cancelled.add(trial_id)
        DaskEvent(self._cancel_name(trial_id), client=self.client).set()
        future.cancel()

    def close(self) -> None:
        for trial_id in list(self._futures):
            self.cancel(trial_id)
        try:
            self.client.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()

    # --- helpers ------------------------------------------------------------------------
    def _cancel_name(self, trial_id: int) -> str:
        return f"hpo-{self._run}-cancel-{trial_id}"

    def _take_queued(self, batch: bool) -> None:
        try:
            items = self._events.get(batch=True) if batch else [self._events.get(timeout=POLL_SECONDS)]
        except TimeoutError:
            return
        self._buffer.extend(EpochDone(item) if isinstance(item, EpochReport) else item for item in items)

    def _outcome(self, trial_id: int, future) -> TrialDone:
        from distributed import KilledWorker
        if trial_id in self._cancelled:
            return TrialDone(trial_id=trial_id, epochs_trained=0, error="cancelled")
        try:
            return future.result()
        except KilledWorker as exc:
            return TrialDone(trial_id=trial_id, epochs_trained=0, lost=True,
                             error=f"the Dask worker running it died ({exc})")
        except Exception as exc:   # noqa: BLE001 - lost connection, unpicklable result: the trial's failure
            return TrialDone(trial_id=trial_id, epochs_trained=0, lost=True,
                             error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())


# --- inside a Dask worker process ---------------------------------------------------------

_TRAINERS: dict[str, object] = {}
_TRAINER_LOCK = threading.Lock()


def train_on_worker(experiment, task: TrainTask, queue_name: str, cancel_name: str, threads: int) -> TrialDone:
    """One trial on this worker: epochs stream to the driver's queue as they finish."""
    from distributed import Event as DaskEvent
    from distributed import Queue, get_worker

    events, cancel = Queue(queue_name), DaskEvent(cancel_name)
    trained, error, trace = 0, None, None
    with _TRAINER_LOCK:     # a worker started with several threads still trains one trial at a time
        try:
            trainer = _trainer(experiment, get_worker().name, threads)
            epochs = trainer.run(task)
            for report in epochs:
                events.put(report)
                trained += not report.replayed
                if cancel.is_set():
                    epochs.close()
                    error = "cancelled"
                    break
        except Exception as exc:   # a failed trial is data for the study, not a crash
            error, trace = f"{type(exc).__name__}: {exc}", traceback.format_exc()
    done = TrialDone(trial_id=task.trial_id, epochs_trained=trained, error=error, traceback=trace)
    events.put(done)
    return done


def _trainer(experiment, worker_name, threads: int):
    key = f"{experiment.name}:{experiment.seed}:{hash(repr(experiment.to_dict()))}"
    if key not in _TRAINERS:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        from hpo.native_logs import import_tensorflow
        tf = import_tensorflow()
        if threads and not tf.config.list_physical_devices("GPU"):
            try:
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(threads)
            except RuntimeError:   # this process already ran TensorFlow: keep its settings
                pass
        from hpo.training.setup import trainer_for
        # LocalCluster names its workers 0..n-1: that spreads them over this machine's GPUs.
        slot = worker_name if isinstance(worker_name, int) else 0
        _TRAINERS.clear()      # one experiment per worker at a time; drop the last one's data
        _TRAINERS[key] = trainer_for(experiment, slot=slot)
    return _TRAINERS[key]
