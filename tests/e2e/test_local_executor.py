"""The local process pool: several trials at once, worker deaths survived."""

import signal

import pytest

from hpo.study import Study
from tests.support import crashing_builder
from tests.support.cli import SMOKE, hpo_here, start_hpo
from tests.support.experiments import LOCAL_FORKSERVER_GROUP
from tests.support.faults import kill, query, wait_for, worker_processes


# In the xdist group of the other in-process local search (test_fused_search.py), so that one
# test process runs both and they share its forkserver (see LOCAL_FORKSERVER_GROUP).
@pytest.mark.xdist_group(LOCAL_FORKSERVER_GROUP)
def test_a_worker_that_dies_fails_only_its_trial(tmp_path, capsys):
    """Also the fit engine on the local backend: its worker trains every trial with Keras's
    `model.fit`, the engine line reaches the driver's log, and the study rows are complete.
    The driver runs in this process; its worker is a process of its own, replaced after each
    crash (one worker: each process start is a TensorFlow import)."""
    study_dir = tmp_path / "study"
    crashing = ("{layers: 1, units: 16, dropout: %s, learning_rate: 0.01, optimizer: adam}"
                % crashing_builder.CRASHING_DROPOUT)
    done = hpo_here(capsys, "search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
                    "--set", "execution.workers=1", "--set", "model.builder=tests.support.crashing_builder:build",
                    "--set", f"search.initial_configs=[{crashing}]", "--set", "search.max_trials=4",
                    "--set", "execution.max_retries=1", "--set", "training.engine=fit")
    assert done.returncode == 0, done.stderr[-3000:]
    study = Study.open(study_dir)
    trials = study.trials()
    failed = [t for t in trials if t.state.value == "failed"]
    # A crash that repeats is retried max_retries times, then the trial fails with the reason.
    assert [t.config["dropout"] for t in failed] == [crashing_builder.CRASHING_DROPOUT]
    assert all(t.attempts == 2 and "worker process died with exit code 9" in t.error
               and "gave up after 2 attempts" in t.error for t in failed)
    complete = [t for t in trials if t.state.value == "complete"]
    assert complete
    for trial in complete:
        epochs = [m for _, _, m in study.epochs(trial.trial_id)]
        assert len(epochs) == trial.epochs_trained
        assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(epochs[-1])
        assert trial.value == epochs[-1]["val_accuracy"]
    assert "trains with the fit engine: training.engine is fit" in (study_dir / "hpo.log").read_text()


def test_sigterm_stops_the_search_cleanly_and_it_resumes(tmp_path, capsys):
    study_dir = tmp_path / "study"
    # Batches of 8 make each epoch four times longer than the smoke's, so that trials are still
    # running when the first one has finished, without a long search for the resume. (Under
    # load, the smoke's 8 quick trials once all finished before the signal.) One worker: each
    # worker process is a TensorFlow import, and one is enough to be stopped with its driver.
    args = ["search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=local",
            "--set", "execution.workers=1", "--set", "search.max_trials=8", "--set", "training.batch_size=8"]
    driver = start_hpo(*args)
    wait_for(lambda: query(study_dir, "SELECT 1 FROM trials WHERE state='complete'"), what="a finished trial",
             process=driver)
    workers = worker_processes(driver.pid)
    assert workers, "the driver has no worker processes"
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 130, err[-2000:]
    trials = Study.open(study_dir).trials()
    states = [t.state.value for t in trials]
    assert "complete" in states and "running" not in states
    assert all(t.error == "terminated (SIGTERM)" for t in trials if t.state.value == "interrupted")
    wait_for(lambda: not any(w.is_running() and w.status() != "zombie" for w in workers), timeout=20,
             what="the workers to exit with the driver")
    # The execution section may change on resume; inline spares starting another worker.
    resumed = hpo_here(capsys, *args, "--set", "execution.backend=inline")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    states = [(t.trial_id, t.state.value) for t in trials]
    assert len(trials) == 8 and all(state == "complete" for _, state in states), states


def fake_worker(slot, target, *args, trial_id=None, inbox=None):
    """A stand-in worker process writing to its own event pipe, holding at most one trial."""
    import multiprocessing as mp

    from hpo.executors.local import _Worker
    from hpo.jobs import TrainTask

    events, writer = mp.get_context("spawn").Pipe(duplex=False)
    process = mp.get_context("spawn").Process(target=target, args=(writer, *args), daemon=True)
    process.start()
    writer.close()
    held = {} if trial_id is None else {trial_id: TrainTask(trial_id=trial_id, config={}, start_epoch=0,
                                                            end_epoch=5, seed=0, checkpoint_out="unused.npz")}
    return _Worker(slot, process, inbox=inbox, events=events, tasks=held, epochs={t: 0 for t in held})


def event_loop_only(workers, capacity=1):
    """The local executor's event loop over stand-in workers, without real trainers."""
    import collections

    from hpo.executors.affinity import WorkerAffinity
    from hpo.executors.local import LocalProcessExecutor
    executor = object.__new__(LocalProcessExecutor)
    executor._cancelled, executor.recycle_after, executor.capacity = set(), 100, capacity
    executor.affinity = WorkerAffinity()
    executor._backlog = collections.deque()
    executor._workers = workers
    return executor


def test_a_worker_killed_mid_send_leaves_the_other_workers_events_flowing():
    """kill -9 can land while a worker is writing an event. With one queue shared by all
    workers that leaves the queue's write lock held and its stream torn, so no worker's
    events get through (the likely cause of a CI hang in the kill test). Each worker now has
    its own pipe: the torn one reads as a dead worker, whose trial is reported lost, and the
    other worker's events still arrive."""
    import threading

    from hpo.jobs import EpochDone, EpochReport, TrialDone
    from tests.support.pipe_workers import idle, report_then_idle, stuck_mid_send

    report = EpochReport(trial_id=2, epoch=1, metrics={"loss": 0.5})
    replacements = []
    executor = event_loop_only([fake_worker(0, stuck_mid_send, trial_id=1),
                                fake_worker(1, report_then_idle, ("epoch", report), trial_id=2)])
    executor._start = lambda slot: replacements.append(slot) or fake_worker(slot, idle)
    try:
        stuck = executor._workers[0]
        # Part of a 64 MiB message is in the pipe, the rest cannot fit: the kill tears it.
        wait_for(lambda: stuck.events.poll(), what="the big message to start arriving")
        kill(stuck.process.pid)
        events = []
        reader = threading.Thread(target=lambda: events.extend(executor.next_event() for _ in range(2)), daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert not reader.is_alive(), f"the driver's event loop hung; got {events}"
        epochs = [e for e in events if isinstance(e, EpochDone)]
        lost = [e for e in events if isinstance(e, TrialDone)]
        assert [e.report for e in epochs] == [report]
        assert [(e.trial_id, e.lost) for e in lost] == [(1, True)] and "exit code -9" in lost[0].error
        assert replacements == [0]
    finally:
        for w in executor._workers:
            w.process.kill()


def test_an_idle_workers_trials_go_out_while_another_worker_streams_events():
    """A busy worker's refills wait for a quiet moment (so a fused group's refills leave
    together); an idle worker's must not, or a stream of events from the others would hold
    them for as long as it lasts."""
    import queue

    from hpo.jobs import EpochDone, EpochReport, TrainTask
    from tests.support.pipe_workers import idle, report_forever

    inbox = queue.Queue()
    report = EpochReport(trial_id=2, epoch=1, metrics={"loss": 0.5})
    executor = event_loop_only([fake_worker(0, idle, inbox=inbox),
                                fake_worker(1, report_forever, ("epoch", report), trial_id=2)], capacity=4)
    try:
        wait_for(lambda: executor._workers[1].events.poll(), what="the stream to start")
        task = TrainTask(trial_id=7, config={}, start_epoch=0, end_epoch=1, seed=0, checkpoint_out="unused.npz")
        executor.submit(task)                       # to the idle worker: it holds the fewest
        assert isinstance(executor.next_event(), EpochDone)
        assert inbox.get_nowait() == ("run", [task])
    finally:
        for w in executor._workers:
            w.process.kill()
