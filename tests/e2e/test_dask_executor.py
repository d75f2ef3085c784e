"""The dask backend on a LocalCluster of two worker processes, loopback only."""

import os

from hpo.study import Study
from tests.support.cli import SMOKE, hpo_here
from tests.support.faults import assert_parallel_smoke_run, query


def test_smoke_experiment_on_a_local_dask_cluster(tmp_path, capsys):
    """Also the fit engine on Dask: the workers train every trial with Keras's `model.fit`, its
    promotions continue from the checkpoints, and the engine line reaches the driver's log.
    The driver runs in this process; the cluster's workers are processes of their own."""
    study_dir = tmp_path / "study"
    done = hpo_here(capsys, "search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=dask",
               "--set", "execution.workers=2", "--set", "training.engine=fit")
    trials = assert_parallel_smoke_run(done, study_dir)
    # The driver's routine empty waits on the event queue are not reported as errors.
    assert "queue_get" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    # Epochs streamed back one by one; checkpoints and TensorBoard runs landed in the study folder.
    study = Study.open(study_dir, read_only=True)
    for t in trials:
        epochs = [m for _, _, m in study.epochs(t.trial_id)]
        assert len(epochs) == t.epochs_trained
        assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(epochs[-1])
        assert t.value == epochs[-1]["val_accuracy"]
        assert (study_dir / "checkpoints" / f"trial_{t.trial_id:04d}.npz").exists()
    assert len(list((study_dir / "tensorboard").glob("trial_*"))) >= 4
    assert "trains with the fit engine: training.engine is fit" in (study_dir / "hpo.log").read_text()


def test_cancelling_one_trial_of_a_fused_share_lets_the_others_finish(tmp_path):
    """One Dask task trains three trials fused; cancelling one mid-way stops only that one.
    The other two pick up from their progress checkpoints as a group of two, so no epoch of
    theirs is trained twice, and nothing more comes back for the cancelled trial."""
    from hpo.config import load_experiment
    from hpo.executors.dask_cluster import DaskExecutor
    from hpo.jobs import EpochDone, TrainTask, TrialDone

    experiment = load_experiment(SMOKE, ["model.params={layers: 1, units: 16}", "training.fuse=4",
                                         "training.compile=graph", "training.checkpoint_seconds=0",
                                         "execution.backend=dask"])
    executor = DaskExecutor(experiment, tmp_path, workers=1)
    try:
        # The worker's share of the cores sizes TensorFlow's pools and OpenMP's alike, unless
        # the environment already says (the suite's conftest sets TensorFlow's to 1).
        names = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")
        expected = [os.environ.get(name, str(os.cpu_count() or 1)) for name in names]
        pools = executor.client.run(lambda: [os.environ.get(name) for name in names])
        assert list(pools.values()) == [expected], pools
        assert executor.free_slots() == 4
        for i in range(3):
            executor.submit(TrainTask(trial_id=i, config={"learning_rate": 0.01 * (i + 1), "dropout": 0.1},
                                      start_epoch=0, end_epoch=40, seed=i,
                                      checkpoint_out=str(tmp_path / f"trial_{i}.npz")))
        assert sorted(executor.running()) == [0, 1, 2] and executor.free_slots() == 1
        reports: dict[int, list] = {0: [], 1: [], 2: []}
        ends: dict[int, TrialDone] = {}
        while executor.running():
            event = executor.next_event()
            if isinstance(event, EpochDone):
                reports[event.report.trial_id].append(event.report)
                if event.report.trial_id == 1 and event.report.epoch == 2:
                    executor.cancel(1)
                    assert sorted(executor.running()) == [0, 2]
            else:
                ends[event.trial_id] = event
    finally:
        executor.close()
    assert sorted(ends) == [0, 2] and all(e.error is None for e in ends.values()), ends
    assert [r.epoch for r in reports[1]] == [1, 2]
    for trial_id in (0, 2):
        seen = [(r.epoch, r.replayed) for r in reports[trial_id]]
        trained = [r for r in reports[trial_id] if not r.replayed]
        assert sorted({r.epoch for r in reports[trial_id]}) == list(range(1, 41)), seen
        assert len({r.epoch for r in trained}) == len(trained) and trained[-1].epoch == 40, seen
        assert any(replayed for _, replayed in seen), seen      # the restart replayed its checkpoint
        assert trained[0].metrics["fused_trials"] == 3 and trained[-1].metrics["fused_trials"] == 2


def test_a_time_limit_stops_fused_shares_and_a_rerun_resumes_them(tmp_path, capsys):
    """The time limit interrupts a fused share mid-training on dask; the driver stops its
    workers and exits, and a rerun resumes the trials from their progress checkpoints, every
    epoch recorded once. Both drivers run in this process; the Dask worker is a process of its own."""
    study_dir = tmp_path / "study"
    # Epochs of about a third of a second for the group (graph mode: no compile-mode
    # measurement at start-up), so that 40 of them outlast the time limit on any machine
    # while start-up, however slow, leaves room for a few.
    epochs = 40
    long_fused = ["--set", "space={learning_rate: {type: float, low: 0.001, high: 0.03, log: true}}",
                  "--set", "model.params={layers: 2, units: 128}", "--set", "search.algorithm=random",
                  "--set", f"search.min_budget={epochs}", "--set", f"search.max_budget={epochs}",
                  "--set", "search.max_trials=4", "--set", "training.batch_size=8",
                  "--set", "training.checkpoint_seconds=0", "--set", "training.compile=graph",
                  "--set", "training.fuse=4", "--set", "execution.backend=dask", "--set", "execution.workers=1"]
    search = ["search", SMOKE, "--study-dir", str(study_dir), *long_fused]
    first = hpo_here(capsys, *search, "--set", "search.time_limit=12")
    assert first.returncode == 0, first.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert [t.state.value for t in trials] == ["interrupted"] * 4, [(t.trial_id, t.state) for t in trials]
    trained_before = {t: n for t, n in query(study_dir, "SELECT trial_id, MAX(epoch) FROM epochs GROUP BY trial_id")}
    assert trained_before and max(trained_before.values()) < epochs

    again = hpo_here(capsys, *search, "--set", "search.time_limit=null")
    assert again.returncode == 0, again.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert all(t.state.value == "complete" for t in trials), [(t.trial_id, t.state, t.error) for t in trials]
    for t in trials:
        recorded = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=? ORDER BY epoch",
                                            (t.trial_id,))]
        assert recorded == list(range(1, epochs + 1)), (t.trial_id, recorded)
        assert t.epochs_trained <= epochs - trained_before.get(t.trial_id, 0) + 1, (t.trial_id, t.epochs_trained)
