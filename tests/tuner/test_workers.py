"""Parallel from Python: workers=N with a build_model defined in the script's __main__."""

import subprocess
import sys
from pathlib import Path

import pytest

from hpo.study import Study
from tests.support.cli import cli_env

SCRIPT = Path(__file__).parent / "scripts" / "workers_from_main.py"


@pytest.mark.slow
def test_a_build_model_in_main_ships_to_two_worker_processes(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=cli_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trials 6 ['COMPLETED']" in done.stdout
    study = Study.open(tmp_path / "par", read_only=True)
    assert study.experiment()["execution"] == {**study.experiment()["execution"], "backend": "local", "workers": 2}
    assert all(t.state.value == "complete" for t in study.trials())


@pytest.mark.slow
def test_a_tuner_given_a_dask_scheduler_trains_its_trials_there(tmp_path, digits):
    """`scheduler=` joins a running Dask scheduler: the trainer factory (with build_model, by
    value, and the arrays) goes to its worker, which trains every trial. The cluster's worker
    runs in this process (threads), so the test pays no TensorFlow import of its own."""
    from distributed import LocalCluster

    import hpo.keras_tuner as kt
    from tests.tuner.conftest import small_mlp

    x, y, xv, yv = digits
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        tuner = kt.Hyperband(small_mlp, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                             directory=str(tmp_path), project_name="dask", scheduler=cluster.scheduler_address)
        tuner.search(x, y, validation_data=(xv, yv), batch_size=32, verbose=0)
        executed = sum(len(w.state.tasks) + w.state.executed_count for w in cluster.workers.values())
    assert executed >= 1                                    # shares ran on the cluster's worker
    study = Study.open(tmp_path / "dask", read_only=True)
    assert study.experiment()["execution"]["backend"] == "dask"
    assert study.experiment()["execution"]["scheduler"] == cluster.scheduler_address
    trials = study.trials()
    assert len(trials) == 6 and all(t.state.value == "complete" for t in trials)
    assert "joined the Dask scheduler" in (tmp_path / "dask" / "hpo.log").read_text()
    model = tuner.get_best_models(1)[0]
    assert model.evaluate(xv, yv, verbose=0)[1] == pytest.approx(tuner.oracle.get_best_trials(1)[0].score, abs=1e-6)
