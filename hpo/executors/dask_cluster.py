"""Trials on a Dask cluster: a LocalCluster on this machine, or a running scheduler.

Trials go out as shares: one Dask task (`pure=False`: the same config twice is two
trainings) trains a list of trials through its own `InlineExecutor`, which with
`training.fuse` > 1 (or `auto`) trains those sharing an architecture, batch size and epoch
range as one fused program. With `fuse: 1` a share is one trial. The task streams its
per-epoch reports and trial ends to the driver as it trains, so the driver records epochs and
makes rung decisions as they happen, and between epochs it reads the run's cancelled trials
from a `distributed.Variable`, so the driver can stop any of them. A worker process
keeps one Trainer per experiment, so its compiled programs and on-device data serve every
trial it runs.

Shares are cut like the `local` backend's: trials submitted while a worker is idle leave at
once, split evenly over the idle workers; the rest wait until no event is waiting (a fused
group's ends arrive together, so the trials refilling its slots leave as one share and can
fuse again). Shares beyond the worker count queue on the scheduler. A share goes to a worker
known to be free (one whose share has ended, or that has had none yet), as a loose
restriction: the scheduler alone would as readily queue it behind a busy worker's share.

The driver stays the only writer of the study database; workers write checkpoints and
TensorBoard runs into the study folder, which must be shared storage on a cluster. Compile
decisions (`compile: auto`) come back as events, which the runner records; every share
carries the decisions known so far, so a worker measures an architecture only once.

Events travel as Dask's structured events (`Worker.log_event` on a topic of the run, to which
the driver's client subscribes): a worker hands each event, pickled with its own address, to
its stream to the scheduler and trains on without waiting for a reply, and the scheduler
passes it on down the client's stream, in the order sent. The client's handler puts it in a
local queue, and so does each share's future as it ends: the driver blocks on that queue and
wakes at the first of them, without polling the scheduler. (A `distributed.Queue` costs a
round trip per put, which the worker waits out, and its timed `get` makes the scheduler log an
error with its traceback each time it times out, dask/distributed#2855.) A share's ends travel
ahead of its task's completion on those same streams, so a share that ends with a trial
unreported lost its worker (or was cancelled). The scheduler keeps the last
`distributed.admin.low-level-log-length` events of each topic (1,000 by default): a remote
scheduler keeps them after the run. Whatever the driver waits for, it says on the console
(`hpo.executors.dask_watch`).

Worker deaths: on the LocalCluster we start, the scheduler gives up on a task at the first
lost worker (`allowed-failures: 0`), so the runner sees the loss, counts the attempt and
retries from the trial's progress checkpoint; every trial of a lost share comes back lost.
A remote scheduler keeps its own policy: it reruns lost tasks itself (they also resume from
the progress checkpoint) and the runner only hears of it when the scheduler gives up.
"""

from __future__ import annotations

import collections
import logging
import os
import pickle
import queue
import signal
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hpo.executors.dask_watch import QUIET_SECONDS, CallWatch, join_scheduler, quiet_trials_note
from hpo.executors.worker_trainer import trainer_for_experiment
from hpo.jobs import CompileChoiceMade, EpochDone, Event, TrainTask, TrialDone
from hpo.training.seeding import use_thread_private_python_random

log = logging.getLogger("hpo.executors")

WAIT_SECONDS = 1.0       # the driver's longest wait on its inbox before it looks again at the shares' futures
CANCEL_CHECK_SECONDS = 0.25     # a worker reads the cancelled trials at most this often


@dataclass
class _Share:
    """One Dask task training a list of trials."""
    future: object
    trial_ids: set[int] = field(default_factory=set)     # those whose end has not come back yet
    worker: str | None = None     # the address of the worker running it, once known
    judged: bool = False      # its future ended and the trials it left unreported are buffered
    worker_died: bool = False     # its future ended in KilledWorker: its worker's address is gone


class _OwnLosses(logging.Filter):
    """Drops the scheduler's records of a dead worker's tasks and data that are this run's
    (their keys start with `prefix`): the runner says what each loss means for its trial."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        died = "workers died while trying to run it" in message or "caused the cluster to lose" in message
        return not (died and self.prefix in message)


class DaskExecutor:
    def __init__(self, experiment, study_dir: str | Path, workers: int | None, scheduler: str | None = None,
                 known_compile_choices=None, make_trainer=None):
        """`make_trainer`: what the workers train with, a picklable `(experiment, slot,
        known_compile_choices) -> trainer` (default: the experiment's Keras trainer)."""
        import dask
        from distributed import Client, LocalCluster, Variable

        self.experiment = experiment
        self.study_dir = str(study_dir)
        self._make_trainer = make_trainer
        self._scattered = None         # make_trainer, held by the workers (`_trainer_maker`)
        self._cluster = None
        self.worker_start_method: str | None = None     # a LocalCluster's: "forkserver" or "spawn"
        if scheduler:
            self.client = join_scheduler(scheduler)
            log.info("joined the Dask scheduler at %s", scheduler)
        else:
            workers = workers or 1
            threads = str(max(1, (os.cpu_count() or 1) // workers))
            # Dask pins OpenMP/MKL to one thread per worker process; TensorFlow's CPU kernels
            # (oneDNN) use OpenMP, so a worker owning two cores would run at half speed. And
            # TensorFlow sizes its own thread pools for the whole machine: each worker gets its
            # share of the cores there too, as the local backend's workers do. A pool size the
            # user set in the environment is kept.
            pools = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                     "TF_NUM_INTEROP_THREADS")
            environ = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}),
                       **{name: _users_pool_size(name, threads) for name in pools}}
            _POOL_SIZES_WRITTEN.update({name: environ[name] for name in pools})
            self.worker_start_method = _worker_start_method(make_trainer)
            with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                                  "distributed.nanny.pre-spawn-environ": environ,
                                  "distributed.worker.multiprocessing-method": self.worker_start_method}):
                # Loopback only: nothing outside this machine can reach the cluster. Each worker
                # runs this module's `dask_setup` as it starts.
                self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                             host="127.0.0.1", dashboard_address=None,
                                             silence_logs=logging.ERROR, preload=[__name__])
            self.client = Client(self._cluster)
            log.info("started a Dask LocalCluster of %d worker processes", workers)
        self._run = uuid.uuid4().hex[:8]
        # A LocalCluster's scheduler runs in this process and logs at ERROR each loss that
        # the runner reports itself (the trial retried or failed, the trainer maker sent
        # again); a remote scheduler logs on its own machine.
        self._own_losses = _OwnLosses(f"hpo-{self._run}-") if self._cluster is not None else None
        if self._own_losses is not None:
            logging.getLogger("distributed.scheduler").addFilter(self._own_losses)
        self._watch = CallWatch(self.client.scheduler.address)
        with self._watch.call("a request for its workers"):
            info = self.client.scheduler_info()["workers"]
        if scheduler and not info:
            log.warning("the Dask scheduler at %s has no worker yet: trials wait until one joins", scheduler)
        self._gpu_resources = any("GPU" in w.get("resources", {}) for w in info.values())
        self.slots = workers or max(1, sum(w.get("nthreads", 1) for w in info.values()))
        self.capacity = experiment.training.jobs_per_trainer     # trials per worker
        self._compile_choices = dict(known_compile_choices or {})
        self._threads = max(1, (os.cpu_count() or 1) // self.slots) if self._cluster is not None else 0
        # What the workers' event batches and the shares' ends put, on the client's own thread;
        # the driver's thread blocks on it. Subscribed before any share leaves, on the same
        # stream to the scheduler, so the scheduler knows the subscriber before a worker sends.
        self._inbox: queue.Queue[tuple[str, object]] = queue.Queue()
        self._topic = f"hpo-{self._run}-events"
        self.client.subscribe_topic(self._topic, self._on_published)
        with self._watch.call("the creation of the run's list of cancelled trials"):
            self._cancel_list = Variable(f"hpo-{self._run}-cancelled", client=self.client)
            self._cancel_list.set([])
        self._unsent: list[TrainTask] = []
        self._shares: dict[str, _Share] = {}
        self._share_of: dict[int, str] = {}        # trial id -> the key of the share training it
        self._epochs: dict[int, int] = {}          # trial id -> epochs trained (for a lost share)
        self._cancelled: set[int] = set()
        self._buffer: collections.deque[Event] = collections.deque()     # reports as they arrived
        self._decoded: collections.deque[Event] = collections.deque()    # booked by has_event, not yet handed on
        # Workers known to have no share of ours: the next share goes to one of them.
        self._free_workers: list[str] = [address for address in info]
        self._heard = self._noted = time.monotonic()     # the last event; the last note about waiting

    # --- the executor protocol ----------------------------------------------------------
    def free_slots(self) -> int:
        return max(0, self.slots * self.capacity - len(self._unsent) - len(self._share_of))

    def idle_workers(self) -> int:
        # Workers with no share; the unsent trials will go to as many of them as they fill.
        idle = max(0, self.slots - len(self._shares))
        return idle - min(idle, len(self._unsent))

    def running(self) -> list[int]:
        # A trial stays running until next_event hands on its end, which has_event may have
        # decoded already.
        return [t.trial_id for t in self._unsent] + \
            [trial_id for trial_id in self._share_of if trial_id not in self._cancelled] + \
            [e.trial_id for e in self._decoded if isinstance(e, TrialDone)]

    def submit(self, task: TrainTask) -> None:
        if self.free_slots() < 1:
            raise RuntimeError("no free slot on the Dask cluster")
        self._unsent.append(task)

    def has_event(self) -> bool:
        # What has arrived is decoded now: a report may turn out to be no event (a cancelled
        # trial's, a duplicate end), and a trial's end that has arrived is an event in hand.
        self._take_inbox(wait=False)
        while not self._decoded and self._buffer:
            event = self._on_event(self._buffer.popleft())
            if event is not None:
                self._decoded.append(event)
        return bool(self._decoded)

    def next_event(self) -> Event:
        if self._decoded:
            return self._decoded.popleft()
        while True:
            while self._buffer:
                event = self._on_event(self._buffer.popleft())
                if event is not None:
                    return event
            # Idle workers get their trials at once; busy ones only when no event is waiting.
            self._send_unsent(idle_only=True)
            if self._take_inbox(wait=False):
                continue
            self._send_unsent()
            self._take_inbox(wait=True)

    def cancel(self, trial_id: int) -> None:
        unsent = [t for t in self._unsent if t.trial_id == trial_id]
        if unsent:                                   # never left the driver
            self._unsent.remove(unsent[0])
            return
        key = self._share_of.get(trial_id)
        if key is None:
            return
        self._cancelled.add(trial_id)
        self._cancel_list.set(sorted(self._cancelled))
        share = self._shares[key]
        if share.trial_ids <= self._cancelled:       # nothing left in it worth finishing
            share.future.cancel()

    def close(self) -> None:
        self._unsent.clear()
        try:
            self.client.unsubscribe_topic(self._topic)
            if self._share_of:               # stop every share at once: one round trip, not one per trial
                self._cancelled.update(self._share_of)
                self._cancel_list.set(sorted(self._cancelled))
                for share in self._shares.values():
                    share.future.cancel()
            with self._watch.call("the closing of this client"):
                self.client.close()
        finally:
            self._watch.close()
            if self._cluster is not None:
                self._cluster.close()
            if self._own_losses is not None:
                logging.getLogger("distributed.scheduler").removeFilter(self._own_losses)

    # --- helpers ------------------------------------------------------------------------
    def _send_unsent(self, idle_only: bool = False) -> None:
        """The submitted trials as shares: split evenly over the idle workers, or one share
        queued behind the busy ones when none is idle."""
        idle = self.slots - len(self._shares)
        if not self._unsent or (idle_only and idle < 1):
            return
        count = max(1, min(idle, len(self._unsent)))
        tasks, self._unsent = self._unsent, []
        for part in range(count):
            self._submit_share(tasks[part * len(tasks) // count:(part + 1) * len(tasks) // count],
                               self._free_workers.pop(0) if self._free_workers else None)

    def _submit_share(self, tasks: list[TrainTask], worker: str | None = None) -> None:
        """One share out; `worker`: one known to be free, which gets it. Left to itself, the
        scheduler places a task that reads the scattered trainer maker beside a busy worker's
        running task as readily as on a free worker, where it waits for that task to end
        while the free one idles (measured: of 400 such tasks on 16 workers, 2 went to each
        of four workers and over 60 to each of four others). The restriction is loose: a
        worker gone by then leaves the choice to the scheduler."""
        ids = "-".join(str(t.trial_id) for t in tasks[:4]) + ("-etc" if len(tasks) > 4 else "")
        key = f"hpo-{self._run}-trials-{ids}-{uuid.uuid4().hex[:6]}"
        resources = {"GPU": 1} if self._gpu_resources else None
        if not self._shares:           # the quiet time counts from the first trial out
            self._heard = time.monotonic()
        where = {"workers": [worker], "allow_other_workers": True} if worker else {}
        future = self.client.submit(train_share_on_worker, self.experiment, tasks, self._topic,
                                    self._cancel_list.name, self._threads, dict(self._compile_choices),
                                    self._trainer_maker(), pure=False, resources=resources, key=key, **where)
        self._shares[key] = _Share(future, {t.trial_id for t in tasks}, worker)
        # Called on a thread of Dask's (at once when the future has already ended).
        future.add_done_callback(lambda _, key=key: self._inbox.put(("ended", key)))
        for task in tasks:
            self._share_of[task.trial_id], self._epochs[task.trial_id] = key, 0

    def _trainer_maker(self):
        """`make_trainer` as every share receives it: scattered to the workers once (a
        TrainerFactory holds the search's arrays and the pickled build_model), rather than
        sent with each share; scattered again if the workers holding it were lost. Dask
        hands it to each share's function as the object itself."""
        if self._make_trainer is None:
            return None
        if self._scattered is None or self._scattered.status != "finished":
            with self._watch.call("the sending of the trainer maker to the workers"):
                # Named for the run, so the scheduler's word on losing it reads as ours (`_OwnLosses`).
                key = f"hpo-{self._run}-trainer-maker-{uuid.uuid4().hex[:8]}"
                self._scattered = self.client.scatter({key: self._make_trainer}, broadcast=True)[key]
        return self._scattered

    def _on_event(self, event: Event) -> Event | None:
        """Book one event from a worker -> the event to hand on (None: nothing for the runner)."""
        if isinstance(event, CompileChoiceMade):
            self._compile_choices[event.key] = (event.mode, dict(event.detail))
            return event
        if isinstance(event, EpochDone):
            trial_id = event.report.trial_id
            if trial_id not in self._share_of or trial_id in self._cancelled:
                return None
            self._epochs[trial_id] += not event.report.replayed
            return event
        key = self._share_of.pop(event.trial_id, None)
        self._epochs.pop(event.trial_id, None)
        if key is None:            # a duplicate end (its share ended lost after all)
            return None
        share = self._shares[key]
        share.trial_ids.discard(event.trial_id)
        if not share.trial_ids:
            del self._shares[key]
            # A share whose worker died must not send the next one there: the scheduler never
            # places a task restricted to a dead worker's address, even loosely, and it would
            # wait forever. The next share goes where the scheduler places it.
            if share.worker and not share.worker_died and share.worker not in self._free_workers and \
                    all(other.worker != share.worker for other in self._shares.values()):
                self._free_workers.append(share.worker)
        if event.trial_id in self._cancelled:
            self._cancelled.discard(event.trial_id)
            return None
        return event

    def _on_published(self, published) -> None:
        """The client's handler of the run's topic, on the client's event loop: `(scheduler
        time, pickled (worker address, events))`, for the driver's thread to unpickle."""
        self._inbox.put(("events", published[1]))

    def _take_inbox(self, wait: bool) -> bool:
        """Buffer what the inbox holds; `wait`: block until something arrives (up to
        `WAIT_SECONDS`). True when events were buffered. A share that ended is judged after
        every batch that came before it: the trials it did not report come back lost."""
        items = []
        try:
            items.append(self._inbox.get(timeout=WAIT_SECONDS) if wait else self._inbox.get_nowait())
            while True:
                items.append(self._inbox.get_nowait())
        except queue.Empty:
            pass
        ended = False
        for kind, payload in items:
            if kind == "events":
                worker, events = pickle.loads(payload)
                self._buffer.extend(events)
                self._placed(worker, events)
            else:
                ended = True
        if items:
            self._heard = time.monotonic()
        elif wait and self._shares and time.monotonic() - max(self._heard, self._noted) >= QUIET_SECONDS:
            self._note_quiet()
        if ended or (wait and not items):       # a lost callback would cost at most WAIT_SECONDS
            self._judge_ended()
        return bool(self._buffer)

    def _placed(self, worker: str, events: list[Event]) -> None:
        """Where the shares these events came from run: a worker running a share is not free."""
        for event in events:
            trial_id = event.report.trial_id if isinstance(event, EpochDone) else getattr(event, "trial_id", None)
            share = self._shares.get(self._share_of.get(trial_id, ""))
            if share is not None and share.worker != worker:
                share.worker = worker
                if worker in self._free_workers:
                    self._free_workers.remove(worker)

    def _judge_ended(self) -> None:
        reported = {e.trial_id for e in self._buffer if isinstance(e, TrialDone)}
        for share in self._shares.values():
            if not share.judged and share.future.done():
                share.judged = True
                share.worker_died = _killed_worker(share.future)
                self._buffer.extend(self._outcome(trial_id, share.future)
                                    for trial_id in sorted(share.trial_ids - reported))

    def _note_quiet(self) -> None:
        with self._watch.call("a request for its workers"):
            workers = len(self.client.scheduler_info()["workers"])
        log.warning(quiet_trials_note(self.client.scheduler.address, len(self._share_of), len(self._shares),
                                      workers, time.monotonic() - self._heard))
        self._noted = time.monotonic()

    def _outcome(self, trial_id: int, future) -> TrialDone:
        from distributed import KilledWorker
        trained = self._epochs.get(trial_id, 0)
        if trial_id in self._cancelled:
            return TrialDone(trial_id=trial_id, epochs_trained=trained, error="cancelled")
        try:
            ends = {done.trial_id: done for done in future.result()}
            return ends.get(trial_id) or TrialDone(trial_id=trial_id, epochs_trained=trained, lost=True,
                                                   error="its Dask task ended without reporting it")
        except KilledWorker as exc:
            return TrialDone(trial_id=trial_id, epochs_trained=trained, lost=True,
                             error=f"the Dask worker running it died ({exc})")
        except Exception as exc:   # noqa: BLE001 - lost connection, unpicklable result: the trial's failure
            return TrialDone(trial_id=trial_id, epochs_trained=trained, lost=True,
                             error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())


def _killed_worker(future) -> bool:
    """Whether a finished share's future failed because its worker died."""
    from distributed import KilledWorker
    return future.status == "error" and isinstance(future.exception(), KilledWorker)


# The pool sizes a LocalCluster's nannies wrote into this process's environment (they set
# `pre-spawn-environ` there before each start): a later cluster does not take them for the user's.
_POOL_SIZES_WRITTEN: dict[str, str] = {}


def _users_pool_size(name: str, share: str) -> str:
    value = os.environ.get(name)
    return share if value is None or value == _POOL_SIZES_WRITTEN.get(name) else value


def _worker_start_method(make_trainer, gpus: int | None = None, forkserver_running: bool | None = None) -> str:
    """How the LocalCluster's nannies start their workers: on Linux without GPUs, forked from
    the driver's forkserver, which this cluster's first worker starts and which imports
    distributed and TensorFlow once, so a worker starts in a fraction of a second instead of
    the seconds of CPU each import costs; spawned elsewhere. Spawned too when this process's
    forkserver already runs (the local backend's, or an earlier cluster's): a worker forked
    from it would have the environment it started with, not the driver's now, and its hash
    seed. A worker the nanny restarts after a death is spawned: the method holds while the
    cluster starts, and the user's own Dask configuration is theirs again after it."""
    from hpo.executors.local import physical_gpu_count, trains_with_tensorflow, worker_start_context

    gpus = physical_gpu_count() if gpus is None else gpus
    running = _forkserver_running() if forkserver_running is None else forkserver_running
    if running or worker_start_context(gpus, preload_tensorflow=False).get_start_method() != "forkserver":
        return "spawn"
    import dask
    from distributed.utils import get_mp_context

    # distributed sets the forkserver's preload to its own packages the first time it is asked
    # for a forkserver context, and never again: asked here first, ours is set after it and is
    # the one the server starts with.
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        get_mp_context()
    worker_start_context(gpus, trains_with_tensorflow(make_trainer), also_preload=("distributed",))
    return "forkserver"


def _forkserver_running() -> bool:
    """Whether this process's multiprocessing forkserver has started (True when it cannot tell)."""
    import multiprocessing.forkserver

    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    return server is None or getattr(server, "_forkserver_pid", 0) is not None


# --- inside a Dask worker process ---------------------------------------------------------

def dask_setup(worker) -> None:
    """A worker of the LocalCluster we start, as it starts (its preload): Ctrl-C reaches the
    driver's whole process group, and the driver handles it (marks the trials interrupted,
    then closes the cluster), so a worker must not die mid-trial with a traceback of its own,
    nor leave its nanny to restart it while the cluster closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_TRAINERS: dict[str, object] = {}
_TRAINER_LOCK = threading.Lock()


def train_share_on_worker(experiment, tasks: list[TrainTask], topic: str, cancel_name: str,
                          threads: int, known_compile_choices=None, make_trainer=None) -> list[TrialDone]:
    """A share of trials on this worker, fused where they can be; epochs and ends stream to
    the driver's topic as they happen."""
    from distributed import Variable, get_worker

    from hpo.executors.inline import InlineExecutor

    worker, cancelled = get_worker(), Variable(cancel_name)
    ends: list[TrialDone] = []

    def send(event: Event) -> None:
        if isinstance(event, TrialDone):
            ends.append(event)
        worker.log_event(topic, pickle.dumps((worker.address, [event])))     # queued on the worker's stream: no wait

    with _TRAINER_LOCK:     # a worker started with several threads still trains one share at a time
        # The worker's event loop draws from Python's `random` while we train; a trial's
        # initial weights come from its seed only if this thread's draws are its own.
        use_thread_private_python_random()
        try:
            trainer = _trainer(experiment, worker.name, threads, make_trainer)
        except Exception as exc:   # this worker cannot train: every trial of the share fails with why
            for task in tasks:
                send(TrialDone(trial_id=task.trial_id, epochs_trained=0, error=f"{type(exc).__name__}: {exc}",
                               traceback=traceback.format_exc()))
            return ends
        for key, (mode, detail) in (known_compile_choices or {}).items():
            trainer.compile_choices.learn(key, mode, detail)
        executor = InlineExecutor(lambda: trainer, slots=len(tasks))
        for task in tasks:
            executor.submit(task)
        checked = time.monotonic()
        while executor.running():
            # Between epochs (a fused group's reports come out together, so once per epoch).
            if time.monotonic() - checked >= CANCEL_CHECK_SECONDS:
                checked = time.monotonic()
                for trial_id in set(cancelled.get()) & set(executor.running()):
                    executor.cancel(trial_id)
                    send(TrialDone(trial_id=trial_id, epochs_trained=0, error="cancelled"))
                if not executor.running():
                    break
            send(executor.next_event())
        executor.close()
    return ends


def _trainer(experiment, worker_name, threads: int, make_trainer=None):
    # A maker's fingerprint (`hpo.tuner.trainer.TrainerFactory`'s: its pickled build_model) is in
    # the key, so that a long-lived worker given an edited build_model makes a new trainer.
    maker = "keras" if make_trainer is None else \
        f"{make_trainer.__module__}.{make_trainer.__qualname__}:{getattr(make_trainer, 'fingerprint', '')}"
    key = f"{experiment.name}:{experiment.seed}:{hash(repr(experiment.to_dict()))}:{maker}"
    if key not in _TRAINERS:
        if make_trainer is None:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
            from hpo.native_logs import import_tensorflow
            tf = import_tensorflow()
            if threads and not tf.config.list_physical_devices("GPU"):
                try:
                    tf.config.threading.set_intra_op_parallelism_threads(threads)
                    tf.config.threading.set_inter_op_parallelism_threads(threads)
                except RuntimeError:   # this process already ran TensorFlow: keep its settings
                    pass
            make_trainer = trainer_for_experiment
        # LocalCluster names its workers 0..n-1: that spreads them over this machine's GPUs.
        slot = worker_name if isinstance(worker_name, int) else 0
        _TRAINERS.clear()      # one experiment per worker at a time; drop the last one's data
        _TRAINERS[key] = make_trainer(experiment, slot, None)
    return _TRAINERS[key]
