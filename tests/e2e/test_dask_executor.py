"""The dask backend on a LocalCluster of worker processes, loopback only (the fit engine on Dask:
`test_dask_tls.py`)."""

import os

from hpo.study import Study
from tests.support.cli import SMOKE, hpo_here
from tests.support.faults import query


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
        # On CPU-only Linux a worker forks from the driver's forkserver, which has imported
        # distributed and TensorFlow once, unless this process's forkserver already ran (an
        # earlier test's): it is spawned then, and has the driver's environment as it is now.
        parents = executor.client.run(lambda: open(f"/proc/{os.getppid()}/cmdline").read())
        forked = [("forkserver" in parent) for parent in parents.values()]
        assert forked == [executor.worker_start_method == "forkserver"], (executor.worker_start_method, parents)
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
    epoch recorded once. Both drivers run in this process; the Dask worker is a process of its
    own. The rerun trains inline (the execution section may change on resume; what it resumes
    from is the study and the checkpoints the Dask worker left), sparing a second cluster."""
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

    again = hpo_here(capsys, *search, "--set", "search.time_limit=null", "--set", "execution.backend=inline")
    assert again.returncode == 0, again.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert all(t.state.value == "complete" for t in trials), [(t.trial_id, t.state, t.error) for t in trials]
    for t in trials:
        recorded = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=? ORDER BY epoch",
                                            (t.trial_id,))]
        assert recorded == list(range(1, epochs + 1)), (t.trial_id, recorded)
        assert t.epochs_trained <= epochs - trained_before.get(t.trial_id, 0) + 1, (t.trial_id, t.epochs_trained)


def test_each_share_goes_to_the_worker_a_finished_share_freed_and_streams_its_epochs_in_order(tmp_path):
    """Three workers, 15 one-trial shares, each submitted as a trial ends (as the runner does):
    the first three go one to a worker, and each later one to the worker whose trial just
    ended, not behind another worker's running share. Every trial's epochs arrive in order,
    then its one end."""
    from hpo.config import experiment_from_dict
    from hpo.executors.dask_cluster import DaskExecutor
    from hpo.jobs import EpochDone, TrainTask, TrialDone
    from tests.support.where_trainer import make_trainer

    experiment = experiment_from_dict({
        "name": "where", "seed": 1, "data": {"dataset": "synthetic"},
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "search": {"algorithm": "random", "objective": "val_loss", "min_budget": 1, "max_budget": 3},
        "execution": {"backend": "dask", "workers": 3}, "output": {"dir": str(tmp_path)}}, source="test")
    executor = DaskExecutor(experiment, tmp_path, workers=3, make_trainer=make_trainer)

    def submit(trial_id: int) -> None:
        executor.submit(TrainTask(trial_id=trial_id, config={"x": 0.5}, start_epoch=0, end_epoch=1 + trial_id % 3,
                                  seed=trial_id, checkpoint_out=str(tmp_path / f"trial_{trial_id}.npz")))

    epochs: dict[int, list[int]] = {}
    where: dict[int, float] = {}              # trial -> the worker process that trained it
    after: dict[int, int] = {}                # trial -> the trial whose end it was submitted on
    ends: list[int] = []
    try:
        for trial_id in range(3):
            submit(trial_id)
        following = 3
        while executor.running():
            event = executor.next_event()
            if isinstance(event, EpochDone):
                report = event.report
                assert report.trial_id not in ends, report
                epochs.setdefault(report.trial_id, []).append(report.epoch)
                where[report.trial_id] = report.metrics["pid"]
            else:
                assert isinstance(event, TrialDone) and event.error is None, event
                ends.append(event.trial_id)
                if following < 15:
                    after[following] = event.trial_id
                    submit(following)
                    following += 1
    finally:
        executor.close()
    assert sorted(ends) == list(range(15))
    assert all(epochs[t] == list(range(1, 2 + t % 3)) for t in range(15)), epochs
    assert len({where[t] for t in range(3)}) == 3, where
    assert {t: where[t] for t in after} == {t: where[after[t]] for t in after}, (where, after)
