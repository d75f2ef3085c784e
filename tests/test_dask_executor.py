"""The dask backend on a LocalCluster of two worker processes, loopback only."""

from faults import SMOKE, assert_parallel_smoke_run, hpo, query


def test_smoke_experiment_on_a_local_dask_cluster(tmp_path):
    study_dir = tmp_path / "study"
    done = hpo("search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=dask",
               "--set", "execution.workers=2")
    trials = assert_parallel_smoke_run(done, study_dir)
    # Epochs streamed back one by one; checkpoints and TensorBoard runs landed in the study folder.
    for t in trials:
        epochs = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=?", (t.trial_id,))]
        assert len(epochs) == t.epochs_trained
        assert (study_dir / "checkpoints" / f"trial_{t.trial_id:04d}.npz").exists()
    assert len(list((study_dir / "tensorboard").glob("trial_*"))) >= 4
