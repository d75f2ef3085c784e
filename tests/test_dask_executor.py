"""The dask backend on a LocalCluster of two worker processes, loopback only."""

from faults import SMOKE, hpo, query
from hpo.study import Study


def test_smoke_experiment_on_a_local_dask_cluster(tmp_path):
    study_dir = tmp_path / "study"
    done = hpo("search", SMOKE, "--study-dir", str(study_dir), "--set", "execution.backend=dask",
               "--set", "execution.workers=2")
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert len(trials) == 8 and all(t.state.value == "complete" for t in trials)
    spans = sorted((t.started_at, t.finished_at) for t in trials)
    assert any(c < b for (a, b), (c, d) in zip(spans, spans[1:])), f"no two trials overlapped: {spans}"
    # Epochs streamed back one by one; checkpoints and TensorBoard runs landed in the study folder.
    for t in trials:
        epochs = [row[0] for row in query(study_dir, "SELECT epoch FROM epochs WHERE trial_id=?", (t.trial_id,))]
        assert len(epochs) == t.epochs_trained
        assert (study_dir / "checkpoints" / f"trial_{t.trial_id:04d}.npz").exists()
    assert len(list((study_dir / "tensorboard").glob("trial_*"))) >= 4
