"""Trials in parallel on this machine: one worker process per slot, each with its own Trainer.

Processes, not threads: every worker owns a TensorFlow runtime, its device (slot i gets the
i-th GPU, or the CPU) and its compiled programs, so the Python GIL and TF's per-process
state never serialise two trials. TensorFlow is not fork-safe once its runtime has started,
so no worker is forked from the driver: on a Linux machine without GPUs, workers are forked
from multiprocessing's forkserver, a clean process that has imported TensorFlow and nothing
more (`hpo.executors.worker_preload`), so a worker starts, or replaces a dead one, in a
fraction of a second; elsewhere they are started with `spawn`, since a GPU worker must choose
its GPU before TensorFlow's import touches CUDA (`worker_start_context`). Either way a worker never
runs the user's `__main__` again (multiprocessing would: `_hpo_as_main`), so a script that
starts a search at its top level, with no `if __name__ == "__main__":` guard, runs as it
does with one worker. On a CPU-only
machine, the cores are divided between workers
(intra-op threads = cores // workers): on small models two one-core trials finish sooner
than one two-core trial, because per-step overhead does not parallelise.

Each worker sends its events through its own pipe, not a queue shared by all: a worker
killed mid-send (kill -9 lands anywhere) would leave a shared queue's write lock held and
its stream torn, wedging every other worker's events for good; a private pipe only tears
its own, which the driver reads as EOF and drops with the dead worker.

With `training.fuse` > 1 (or `auto`) each worker takes several trials at once and runs them
through its own `InlineExecutor`, whose trainer trains those sharing an architecture, batch
size and epoch range as one fused program: on GPUs, one worker per GPU filling it with a fused
group is where fusion pays most. The driver spreads trials evenly over the workers and
sends each worker its share in one message, and only when no event is waiting (a group's
ends arrive together, so the trials refilling its slots leave together): a worker sees its
whole share before it starts, and can fuse it.

A promotion goes to the worker that trained its parent when that worker is among the least
loaded (`hpo.executors.affinity`): its compiled program is still warm there.

A worker that dies (out of memory, a segfault in a native op, kill -9) is replaced and its
trials reported lost, so the runner retries it from its last progress checkpoint (up to
`execution.max_retries`). Workers are also replaced after `execution.recycle_after`
trials, so whatever a framework leaks per trial cannot pile up over a long search.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import queue
import signal
import sys
from collections import deque
from dataclasses import dataclass, field
from multiprocessing import connection as mp_connection
from pathlib import Path

from hpo.executors.affinity import WorkerAffinity
from hpo.executors.worker_trainer import trainer_for_experiment
from hpo.jobs import CompileChoiceMade, EpochDone, Event, TrainTask, TrialDone

log = logging.getLogger("hpo.executors")

POLL_SECONDS = 0.5


def visible_gpu_for(slot: int, gpu_count: int, parent_visible: str | None) -> str | None:
    """The CUDA_VISIBLE_DEVICES entry worker `slot` gets: one GPU each, round robin, taken
    from the parent's own CUDA_VISIBLE_DEVICES list when it has one. None: no GPU."""
    entries = [e.strip() for e in parent_visible.split(",") if e.strip()] if parent_visible else \
        [str(i) for i in range(gpu_count)]
    if not entries or gpu_count == 0:
        return None
    return entries[slot % len(entries)]


def physical_gpu_count() -> int:
    """NVIDIA GPUs the driver lists, read without initialising CUDA or importing TensorFlow."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def worker_start_context(gpu_count: int, preload_tensorflow: bool, platform: str = sys.platform,
                         also_preload: tuple[str, ...] = ()):
    """How worker processes start: forked from a forkserver that imported TensorFlow once
    (`preload_tensorflow`: see `trains_with_tensorflow`) on Linux without GPUs; `spawn`
    where a GPU is present (each worker sees only its own GPU, which must be set before
    TensorFlow's import initialises CUDA, so nothing can be imported ahead of it) and on other
    systems. `also_preload`: modules the server imports before TensorFlow (the Dask backend's
    `distributed`). The forkserver is one per driver process, started with the first worker and
    kept for every executor after it (its preload is fixed then: a driver whose first workers
    train without TensorFlow forks later ones from a server without it, and they import it
    themselves)."""
    if gpu_count or not platform.startswith("linux") or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    preload = [*also_preload, *(["hpo.executors.worker_preload"] if preload_tensorflow else [])]
    if preload:
        context.set_forkserver_preload(preload)
    return context


def trains_with_tensorflow(make_trainer) -> bool:
    """Whether a worker's trainer imports TensorFlow: the default trainer does, and so does a
    maker that says so (`imports_tensorflow = True`, as the Keras Tuner face's `TrainerFactory`).
    Their workers fork from a server that imported it once; without the preload every worker
    would import TensorFlow itself, seconds of CPU each, from a script or a notebook alike."""
    return make_trainer is None or bool(getattr(make_trainer, "imports_tensorflow", False))


@contextlib.contextmanager
def _hpo_as_main():
    """While a worker starts, `hpo.executors.worker_entry` stands in for this process's
    `__main__`: multiprocessing records the main module when a process starts, and the child
    (spawned, or forked from the forkserver) runs it again first. The user's script must not
    run again in a worker (a top-level search would start a search of its own there); the
    worker's target and arguments are hpo's, and `build_model` travels by value.

    The swap is process-wide, for the moment `Process.start` takes: another thread of the
    driver that reads `sys.modules['__main__']` then (a pickle by reference of one of the
    script's objects) sees hpo's module instead. The driver starts workers from its one
    search loop; a program that starts searches from several threads at once shares this."""
    import hpo.executors.worker_entry as entry

    saved = sys.modules["__main__"]
    sys.modules["__main__"] = entry
    try:
        yield
    finally:
        sys.modules["__main__"] = saved


class _ByValue:
    """A callable that pickles with cloudpickle, each time a worker starts: one defined in the
    driver's `__main__` travels by value, since no worker runs that `__main__`
    (`_hpo_as_main`) to find it by name. Nothing is kept pickled in the driver meanwhile."""

    def __init__(self, function):
        self.function = function

    def __getstate__(self):
        import cloudpickle

        return {"pickled": cloudpickle.dumps(self.function)}

    def __setstate__(self, state):
        import pickle

        self.function = pickle.loads(state["pickled"])

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)


def shipped(make_trainer):
    """What travels to each worker for `make_trainer`: itself when it sends what must go by
    value on its own (`ships_by_value`, as `hpo.tuner.trainer.TrainerFactory` cloudpickles its
    `build_model`), else a `_ByValue` around it. Wrapping such an object would pickle its
    pickled build a second time at every worker start."""
    return make_trainer if getattr(make_trainer, "ships_by_value", False) else _ByValue(make_trainer)


def default_workers(devices: list[str], cpu_count: int) -> int:
    """One worker per GPU; on CPUs only, one per core (capped at 8: beyond that the data
    copies per worker cost more memory than small trials gain)."""
    gpus = [d for d in devices if ":GPU:" in d.upper()]
    return len(gpus) if gpus else max(1, min(cpu_count, 8))


@dataclass
class _Worker:
    slot: int
    process: mp.Process
    inbox: mp.Queue
    events: mp_connection.Connection     # the read end of this worker's own event pipe
    tasks: dict[int, TrainTask] = field(default_factory=dict)   # trial id -> task it holds
    unsent: list[TrainTask] = field(default_factory=list)      # submitted, not yet sent to it
    epochs: dict[int, int] = field(default_factory=dict)       # trial id -> epochs trained
    trials_run: int = 0
    serial: int = 0             # which process this is: a replacement has none of its programs


class LocalProcessExecutor:
    def __init__(self, experiment, study_dir: str | Path, workers: int, known_compile_choices=None,
                 make_trainer=None):
        """`make_trainer`: what each worker trains with, a picklable `(experiment, slot,
        known_compile_choices) -> trainer` (default: the experiment's Keras trainer, after
        the worker has imported TensorFlow and set its threads)."""
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.experiment = experiment
        self.study_dir = str(study_dir)
        self.slots = workers
        self.capacity = experiment.training.jobs_per_trainer     # per worker: its own inline executor's
        # The compile modes decided so far (the study's, then the workers' own events): a new
        # worker starts with them, and each decision is passed on to the other workers.
        self._compile_choices = dict(known_compile_choices or {})
        self._threads = max(1, (os.cpu_count() or 1) // workers)
        self._gpus = physical_gpu_count()
        self._ctx = worker_start_context(self._gpus, preload_tensorflow=trains_with_tensorflow(make_trainer))
        self._make_trainer = None if make_trainer is None else shipped(make_trainer)
        self.recycle_after = experiment.execution.recycle_after
        self.workers_started = 0
        self.affinity = WorkerAffinity()
        self._workers = [self._start(slot) for slot in range(workers)]
        self._cancelled: set[int] = set()
        self._backlog: deque[Event] = deque()    # decoded, not yet handed on (read together, a dead worker's trials)

    def _start(self, slot: int) -> _Worker:
        inbox = self._ctx.Queue()
        events, events_writer = self._ctx.Pipe(duplex=False)
        # A spawned worker inherits the environment at its start (its GPU's set below); a forked
        # one is handed the driver's.
        environ = dict(os.environ) if self._ctx.get_start_method() == "forkserver" else None
        process = self._ctx.Process(target=_worker_main, name=f"hpo-worker-{slot}", daemon=True,
                                    args=(slot, self.experiment, inbox, events_writer, self._threads,
                                          dict(self._compile_choices), self._make_trainer, environ))
        # The child's environment is copied at start: each worker sees one GPU as its GPU:0.
        gpu = visible_gpu_for(slot, self._gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        if gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        try:
            with _hpo_as_main():
                process.start()
        finally:
            if gpu is not None:
                if saved is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = saved
        # The worker now holds the only write end, so its death reads as EOF here.
        events_writer.close()
        self.workers_started += 1
        return _Worker(slot, process, inbox, events, serial=self.workers_started)

    def _recycle_if_due(self, index: int) -> None:
        """Replace a worker that has run its quota once it holds no trial it was sent (trials
        submitted but not yet sent go to its replacement: a fusing worker is refilled as its
        group ends, so it is rarely empty)."""
        worker = self._workers[index]
        if worker.trials_run < self.recycle_after or len(worker.tasks) > len(worker.unsent):
            return
        log.info("worker %d ran %d trials; replacing it with a fresh process", worker.slot, worker.trials_run)
        worker.inbox.put(("stop", None))
        worker.process.join(timeout=10)
        if worker.process.is_alive():
            worker.process.terminate()
        self._replace(index)

    def _replace(self, index: int) -> _Worker:
        """A fresh process in the slot; the trials submitted to the old one but never sent
        to it move over."""
        old = self._workers[index]
        old.events.close()
        self.affinity.forget(old.serial)
        fresh = self._workers[index] = self._start(old.slot)
        for task in old.unsent:
            fresh.tasks[task.trial_id], fresh.epochs[task.trial_id] = task, 0
            self.affinity.wrote(task.checkpoint_out, fresh.serial)
        fresh.unsent = list(old.unsent)
        return fresh

    # --- the executor protocol ----------------------------------------------------------
    def free_slots(self) -> int:
        return sum(self.capacity - len(w.tasks) for w in self._workers)

    def idle_workers(self) -> int:
        return sum(not w.tasks for w in self._workers)

    def running(self) -> list[int]:
        # A trial stays running until next_event hands on its end: has_event may have decoded
        # it already (and a dead worker's trials wait in the backlog).
        handing = [e.trial_id for e in self._backlog if isinstance(e, TrialDone)]
        return [trial_id for w in self._workers for trial_id in w.tasks] + handing

    def submit(self, task: TrainTask) -> None:
        free = [w for w in self._workers if len(w.tasks) < self.capacity]
        if not free:
            raise RuntimeError("no free worker")
        # Spread evenly (every worker busy); among the least loaded, the parent's worker.
        worker = self.affinity.choose(free, [len(w.tasks) for w in free], task.checkpoint_in,
                                      key=lambda w: w.serial)
        self.affinity.wrote(task.checkpoint_out, worker.serial)
        worker.tasks[task.trial_id], worker.epochs[task.trial_id] = task, 0
        worker.unsent.append(task)

    def has_event(self) -> bool:
        # The messages already in the pipes are decoded now: one may turn out to be no event
        # (a cancelled trial's), and a trial's end that has arrived is an event in hand.
        if not self._backlog:
            self._read_ready(timeout=0)
        return bool(self._backlog)

    def next_event(self) -> Event:
        while not self._backlog:
            # A busy worker's new trials go out only when no event is waiting (or once it is
            # idle): a fused group's ends arrive together, and the trials that refill its
            # slots then leave as one share. An idle worker gets its trials at once, so a
            # stream of events from the others cannot starve it.
            self._send_submitted(idle_only=True)
            if not self._read_ready(timeout=0):
                self._send_submitted()
                self._read_ready(timeout=POLL_SECONDS)
            if not self._backlog:
                self._backlog.extend(self._check_workers())
        return self._backlog.popleft()

    def _read_ready(self, timeout: float) -> bool:
        """Decode one message from each worker whose pipe holds one (waiting up to `timeout`
        for the first) into the backlog; whether any pipe was ready."""
        channels = {w.events: w for w in self._workers}
        ready = mp_connection.wait(list(channels), timeout=timeout)
        for channel in ready:
            worker = channels[channel]
            try:
                kind, payload = channel.recv()
            except Exception:   # noqa: BLE001 - EOF or a torn message: the worker died mid-send
                worker.process.kill()
                worker.process.join(timeout=5)
                continue
            event = self._receive(worker, kind, payload)
            if event is not None:
                self._backlog.append(event)
        return bool(ready)

    def _send_submitted(self, idle_only: bool = False) -> None:
        """Each worker's newly submitted trials, in one message: it sees them together."""
        for worker in self._workers:
            if worker.unsent and (not idle_only or len(worker.unsent) == len(worker.tasks)):
                worker.inbox.put(("run", list(worker.unsent)))
                worker.unsent.clear()

    def _receive(self, worker: _Worker, kind: str, payload) -> Event | None:
        """One message from a worker -> the event to hand on (None: nothing for the runner)."""
        if kind == "epoch":
            if payload.trial_id in self._cancelled or payload.trial_id not in worker.epochs:
                return None
            worker.epochs[payload.trial_id] += not payload.replayed
            return EpochDone(payload)
        if kind == "done":
            worker.tasks.pop(payload.trial_id, None)
            worker.epochs.pop(payload.trial_id, None)
            worker.trials_run += 1
            self._recycle_if_due(self._workers.index(worker))
            if payload.trial_id in self._cancelled:
                self._cancelled.discard(payload.trial_id)
                return None
            return payload
        if kind == "choice":
            self._compile_choices[payload.key] = (payload.mode, dict(payload.detail))
            for other in self._workers:
                if other is not worker:
                    other.inbox.put(("choice", payload))
            return payload
        if kind == "startup_failed":       # the worker could not even build its trainer
            raise RuntimeError(f"worker {worker.slot} failed to start: {payload}")
        return None

    def cancel(self, trial_id: int) -> None:
        for worker in self._workers:
            if trial_id not in worker.tasks:
                continue
            unsent = [t for t in worker.unsent if t.trial_id == trial_id]
            if unsent:                                  # never left the driver
                worker.unsent.remove(unsent[0])
                del worker.tasks[trial_id], worker.epochs[trial_id]
            else:
                self._cancelled.add(trial_id)
                worker.inbox.put(("cancel", trial_id))

    def close(self) -> None:
        for worker in self._workers:
            worker.inbox.put(("stop", None))
        for worker in self._workers:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(timeout=5)
            worker.events.close()

    def _check_workers(self) -> list[TrialDone]:
        """Replace dead workers; their trials come back lost (worth another attempt)."""
        lost = []
        for index, worker in enumerate(self._workers):
            if worker.process.is_alive():
                continue
            code = worker.process.exitcode
            log.warning("worker %d died (exit code %s); starting a new one", worker.slot, code)
            fresh = self._replace(index)
            hint = " (killed: out of memory?)" if code in (-9, 137) else ""
            for trial_id in worker.tasks:
                if trial_id not in fresh.tasks and trial_id not in self._cancelled:
                    lost.append(TrialDone(trial_id=trial_id, epochs_trained=worker.epochs.get(trial_id, 0),
                                          error=f"worker process died with exit code {code}{hint}", lost=True))
        return lost


# --- inside a worker process --------------------------------------------------------------

def _worker_main(slot: int, experiment, inbox, events, threads: int, known_compile_choices,
                 make_trainer=None, environ: dict[str, str] | None = None) -> None:
    # Ctrl-C reaches the whole process group; the driver handles it (marks trials interrupted,
    # then stops the workers), so a worker must not die mid-epoch with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if environ is not None:
        # A worker forked from the forkserver has the environment the server started with;
        # the driver's, as it is now, is what a spawned worker would have had.
        os.environ.clear()
        os.environ.update(environ)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        if make_trainer is None:
            from hpo.native_logs import import_tensorflow
            tf = import_tensorflow()
            if not tf.config.list_physical_devices("GPU"):
                tf.config.threading.set_intra_op_parallelism_threads(threads)
                tf.config.threading.set_inter_op_parallelism_threads(threads)
            make_trainer = trainer_for_experiment
        trainer = make_trainer(experiment, slot, known_compile_choices)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which stops the search
        events.send(("startup_failed", f"{type(exc).__name__}: {exc}"))
        return
    from hpo.executors.inline import InlineExecutor
    executor = InlineExecutor(lambda: trainer, slots=experiment.training.jobs_per_trainer)
    parent = mp.parent_process()
    while True:
        try:
            if not executor.running():
                try:
                    message = inbox.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    if parent is not None and not parent.is_alive():   # the driver was killed: do not linger
                        return
                    continue
                if not _handle(message, executor, events, trainer):
                    return
                continue
            if not _drain(inbox, executor, events, trainer):
                return
            if executor.running():
                event = executor.next_event()
                events.send(_message(event))
        except (BrokenPipeError, EOFError):   # the driver is gone: nobody to report to
            return


def _message(event: Event) -> tuple[str, object]:
    if isinstance(event, EpochDone):
        return "epoch", event.report
    return ("choice", event) if isinstance(event, CompileChoiceMade) else ("done", event)


def _drain(inbox, executor, events, trainer) -> bool:
    """Between epochs: the messages that arrived meanwhile (False: stop)."""
    while True:
        try:
            message = inbox.get_nowait()
        except queue.Empty:
            return True
        if not _handle(message, executor, events, trainer):
            return False


def _handle(message, executor, events, trainer) -> bool:
    """One message from the driver (False: stop the worker)."""
    kind, payload = message
    if kind == "stop":
        executor.close()
        return False
    if kind == "run":
        for task in payload:
            executor.submit(task)
    elif kind == "choice":              # another worker's decision: no need to measure it again here
        trainer.compile_choices.learn(payload.key, payload.mode, payload.detail)
    elif kind == "cancel" and payload in executor.running():   # else it ended before the cancel came
        executor.cancel(payload)
        events.send(("done", TrialDone(trial_id=payload, epochs_trained=0, error="cancelled")))
    return True
