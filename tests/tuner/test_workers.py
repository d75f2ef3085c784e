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
    # Every worker forked from the server that imported TensorFlow (and hpo's trainer) once.
    built_in_workers = (tmp_path / "preload.txt").read_text().split()
    assert built_in_workers and set(built_in_workers) == {"True"}


@pytest.mark.slow
def test_a_tuner_given_a_dask_scheduler_trains_its_trials_there(tmp_path, digits, monkeypatch):
    """`scheduler=` joins a running Dask scheduler: the trainer factory (with build_model, by
    value, and the arrays) goes to its worker once, scattered, and every share of trials
    refers to that copy. The cluster's worker runs in this process (threads), so the test
    pays no TensorFlow import of its own."""
    from distributed import Client, Future, LocalCluster

    makers = []
    submit = Client.submit
    monkeypatch.setattr(Client, "submit", lambda self, function, *args, **kwargs:
                        makers.append(args[-1]) or submit(self, function, *args, **kwargs))

    import hpo.keras_tuner as kt
    from tests.tuner.conftest import small_mlp

    x, y, xv, yv = digits
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        tuner = kt.Hyperband(small_mlp, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                             directory=str(tmp_path), project_name="dask", scheduler=cluster.scheduler_address)
        tuner.search(x, y, validation_data=(xv, yv), batch_size=32, verbose=0)
        executed = sum(len(w.state.tasks) + w.state.executed_count for w in cluster.workers.values())
    assert executed >= 1                                    # shares ran on the cluster's worker
    assert len(makers) >= 2 and all(isinstance(m, Future) for m in makers)
    assert len({m.key for m in makers}) == 1                # one copy of the factory, scattered once
    study = Study.open(tmp_path / "dask", read_only=True)
    assert study.experiment()["execution"]["backend"] == "dask"
    assert study.experiment()["execution"]["scheduler"] == cluster.scheduler_address
    trials = study.trials()
    assert len(trials) == 6 and all(t.state.value == "complete" for t in trials)
    assert "joined the Dask scheduler" in (tmp_path / "dask" / "hpo.log").read_text()
    model = tuner.get_best_models(1)[0]
    assert model.evaluate(xv, yv, verbose=0)[1] == pytest.approx(tuner.oracle.get_best_trials(1)[0].score, abs=1e-6)


def test_the_trainer_factory_travels_to_a_worker_with_its_build_pickled_once(monkeypatch):
    """A worker start pickles the factory with multiprocessing's pickler: its state holds the
    script's build_model, cloudpickled by value, and nothing pickles that pickle again."""
    import pickle

    import cloudpickle

    from hpo.executors.local import _ByValue, shipped
    from hpo.tuner.trainer import TrainerFactory

    script = {"__name__": "__main__"}
    exec("def build_model(hp):\n    return 'model'\n", script)       # as in a script's __main__
    factory = TrainerFactory(script["build_model"], ["units"], ["units"])
    assert shipped(factory) is factory
    assert isinstance(shipped(script["build_model"]), _ByValue)     # a bare function still goes by value

    calls = []
    real = cloudpickle.dumps
    monkeypatch.setattr(cloudpickle, "dumps", lambda obj, *a, **k: calls.append(obj) or real(obj, *a, **k))
    sent = pickle.loads(pickle.dumps(shipped(factory)))
    assert calls == [script["build_model"]]
    assert sent.build(None) == "model" and sent.names == ("units",)


def test_a_dask_worker_makes_a_new_trainer_for_an_edited_build_model(monkeypatch):
    """A long-lived Dask worker keeps its trainer between searches of one experiment; a rerun
    whose build_model has the same name but another body must not train the old one."""
    import pickle

    from hpo.executors import dask_cluster
    from hpo.tuner.trainer import TrainerFactory

    def factory_for(body):
        script = {"__name__": "__main__"}
        exec(f"def build_model(hp):\n    return {body!r}\n", script)
        return pickle.loads(pickle.dumps(TrainerFactory(script["build_model"], ["units"], ["units"])))

    made = []
    monkeypatch.setattr(TrainerFactory, "__call__", lambda self, experiment, slot=0, known=None:
                        made.append(self.build(None)) or self.build(None))
    monkeypatch.setattr(dask_cluster, "_TRAINERS", {})

    class Experiment:
        name, seed = "e", 0

        def to_dict(self):
            return {"name": "e"}

    old, same, edited = factory_for("old model"), factory_for("old model"), factory_for("edited model")
    assert old.fingerprint == same.fingerprint != edited.fingerprint
    assert dask_cluster._trainer(Experiment(), 0, 1, old) == "old model"
    assert dask_cluster._trainer(Experiment(), 0, 1, same) == "old model"
    assert dask_cluster._trainer(Experiment(), 0, 1, edited) == "edited model"
    assert made == ["old model", "edited model"]


def test_the_keras_tuner_faces_workers_fork_from_the_tensorflow_server():
    """The face's trainer maker trains Keras models: its local workers fork from the server
    that imported TensorFlow once, rather than each importing it."""
    from hpo.executors.local import trains_with_tensorflow
    from hpo.tuner.trainer import TrainerFactory

    assert trains_with_tensorflow(TrainerFactory(lambda hp: None, ["units"], []))
