"""The bad-input catalogue's cases that the pre-flight refuses (tests/support/bad_inputs.py):
it loads the data and builds the model, so these run with TensorFlow, through `hpo.cli.main`
in this process. Also the refusals that follow the pre-flight (an unwritable study folder, a
Dask scheduler that is not there) and what follows a refusal: a changed experiment is shown
as a diff, and a corrected file runs without --fresh."""

import logging

import pytest

from tests.support.bad_inputs import PREFLIGHT, assert_refused, hooks_module, params, prepare
from tests.support.cli import SMOKE, hpo_here, write_experiment
from tests.support.experiments import DIGITS, DIGITS_200


@pytest.mark.parametrize("bad", params(PREFLIGHT))
def test_bad_input_is_exit_2_before_any_study_folder(tmp_path, capsys, monkeypatch, bad):
    path, args, module = prepare(bad, tmp_path, monkeypatch)
    assert_refused(bad, hpo_here(capsys, *args), tmp_path, path, module)


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = str(write_experiment(tmp_path, DIGITS))
    done = hpo_here(capsys, "search", path, "--set", f"output.dir={blocker}/study")
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in output
    assert path in output and "key 'output.dir'" in output and "cannot write the study folder" in output


def preflight_records(path) -> list[logging.LogRecord]:
    """What the pre-flight of the experiment at `path` logs (it passes)."""
    from hpo.config import load_experiment
    from hpo.driver.preflight import preflight

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("hpo.driver.preflight")
    logger.addHandler(handler)
    try:
        preflight(load_experiment(path))
    finally:
        logger.removeHandler(handler)
    return records


def test_a_user_builder_that_never_reads_a_space_key_gets_a_warning(tmp_path, monkeypatch):

    hooks = hooks_module(tmp_path, monkeypatch)
    path = write_experiment(tmp_path, DIGITS_200.replace("space:\n", "space:\n  depth: {type: int, low: 1, high: 3}\n")
                            + f"model: {{builder: '{hooks}:quiet_builder'}}\n")
    records = preflight_records(path)
    assert any("never read the space key(s) depth" in r.getMessage() for r in records)


def test_a_subclassed_model_without_build_is_searched_and_its_export_refused_with_why(tmp_path, capsys, monkeypatch):
    """A subclassed keras.Model has no weights until its first call: hpo builds it on the data's
    shape, so the pre-flight passes and its trials train. Keras cannot save it without
    get_config(): the export says so and where the trained weights are, and leaves no file."""
    from hpo.study import Study
    from hpo.trial import TrialState

    hooks = hooks_module(tmp_path, monkeypatch)
    path = write_experiment(tmp_path, DIGITS_200 + f"model: {{builder: '{hooks}:subclassed_builder'}}\n")
    study = tmp_path / "study"
    done = hpo_here(capsys, "search", path, "--study-dir", study)
    assert done.returncode == 0, done.stderr[-3000:]
    (trial,) = Study.open(study, read_only=True).trials()
    assert trial.state == TrialState.COMPLETE and trial.value is not None, trial.error
    exported = hpo_here(capsys, "best", study, "--export", tmp_path / "best.keras", "--trust-code")
    assert exported.returncode == 2 and "Traceback" not in exported.stderr
    assert "Keras cannot save the model TwoLayers" in exported.stderr and "get_config()" in exported.stderr
    assert f"--export {tmp_path / 'best.weights.h5'}" in exported.stderr and not (tmp_path / "best.keras").exists()
    # Its weights alone: they load into the model the builder makes (trained: it predicts otherwise).
    weights = tmp_path / "best.weights.h5"
    exported = hpo_here(capsys, "best", study, "--export", weights, "--trust-code")
    assert exported.returncode == 0 and weights.exists(), exported.stderr[-3000:]
    import importlib

    import numpy as np

    from hpo.models import built
    model = built(importlib.import_module(hooks).subclassed_builder(trial.config, (8, 8), 10), (8, 8))
    untrained = model.predict(np.ones((2, 8, 8), "float32"), verbose=0)
    model.load_weights(weights)
    assert not np.allclose(model.predict(np.ones((2, 8, 8), "float32"), verbose=0), untrained)


def test_each_name_of_a_built_in_models_choice_is_built_with_the_parameters_it_turns_on(tmp_path, monkeypatch):
    import hpo.models.mlp
    from hpo.config import load_experiment
    from hpo.driver.preflight import preflight

    built = []
    mlp = hpo.models.mlp.build_mlp
    monkeypatch.setattr(hpo.models.mlp, "build_mlp", lambda config, *shape: built.append(dict(config)) or
                        mlp(config, *shape))
    # `layers` exists only under tanh: the tanh build must have it, at the low end of its range.
    space = ("space:\n  activation: {type: choice, values: [relu, tanh]}\n"
             "  layers: {type: int, low: 2, high: 3, when: {activation: tanh}}\n")
    preflight(load_experiment(write_experiment(tmp_path, DIGITS_200.replace("space:\n", space))))
    assert [(c["activation"], c.get("layers")) for c in built] == [("relu", None), ("tanh", 2)]


def test_a_user_builders_other_names_are_left_to_its_trials(tmp_path, monkeypatch):
    from hpo.config import load_experiment
    from hpo.driver.preflight import preflight

    hooks = hooks_module(tmp_path, monkeypatch)
    space = "space:\n  activation: {type: choice, values: [relu, no_such_activation]}\n"
    path = write_experiment(tmp_path, DIGITS_200.replace("space:\n", space)
                            + f"model: {{builder: '{hooks}:named_layer_builder'}}\n")
    preflight(load_experiment(path))        # only the low end is built: another name may cost far more


def test_some_searched_batch_sizes_larger_than_the_training_split_are_warned_of(tmp_path):

    space = "space:\n  batch_size: {type: choice, values: [16, 32, 64]}\n"
    path = write_experiment(tmp_path, DIGITS_200.replace("space:\n", space).replace("limit: 200", "limit: 40"))
    records = preflight_records(path)             # 16 and 32 train: the search runs
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert warnings == ["space.batch_size.values: batch sizes above 40 (up to 64) are larger than the training "
                        "split, and the trials that draw one will fail"]


@pytest.mark.slow
def test_changed_experiment_shows_the_diff(tmp_path, capsys):
    path = write_experiment(tmp_path, DIGITS.replace("max_budget: 1", "max_budget: 1, algorithm: random"))
    study = tmp_path / "study"
    assert hpo_here(capsys, "search", path, "--study-dir", study, "--set", "search.max_trials=1").returncode == 0
    done = hpo_here(capsys, "search", path, "--study-dir", study, "--set", "space.units.high=128")
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "space.units.high: 64 -> 128" in output and "--fresh" in output


@pytest.mark.slow
def test_after_an_exit_2_the_corrected_file_runs_without_fresh(tmp_path, capsys):
    path = write_experiment(tmp_path, DIGITS_200.replace("max_budget: 1}", "max_budget: 1, objective: val_auc}"))
    study = tmp_path / "study"
    assert hpo_here(capsys, "search", path, "--study-dir", study).returncode == 2
    write_experiment(tmp_path, DIGITS_200)
    done = hpo_here(capsys, "search", path, "--study-dir", study)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_dask_scheduler_that_is_not_there_is_exit_2_before_any_study_folder(tmp_path, capsys):
    import dask
    import distributed  # noqa: F401 - its config defaults, before a `dask.config.set` that would drop them on exit

    from tests.unit.test_dask_watch import _closed_port

    study_dir = tmp_path / "study"
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        done = hpo_here(capsys, "search", SMOKE, "--study-dir", study_dir,
                        "--set", "execution.backend=dask", "--set", f"execution.scheduler={address}")
    out = done.stdout + done.stderr
    assert done.returncode == 2, out[-2000:]
    assert "key 'execution.scheduler'" in out and f"could not join the Dask scheduler at {address}" in out, out
    assert not study_dir.exists()


def test_corrupted_study_database_is_refused_and_left_untouched(tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    garbage = b"this is not SQLite" * 100
    (study / "study.sqlite").write_bytes(garbage)
    done = hpo_here(capsys, "search", write_experiment(tmp_path, DIGITS), "--study-dir", study)
    output = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in output
    assert "study.sqlite" in output and "not a readable study database" in output
    assert (study / "study.sqlite").read_bytes() == garbage


CONFIGURED_MODEL = '''
import keras


class Configured(keras.Model):       # get_config(), not registered with Keras
    def __init__(self, units, classes, **kwargs):
        super().__init__(**kwargs)
        self.units, self.classes = units, classes
        self.flatten = keras.layers.Flatten()
        self.hidden = keras.layers.Dense(units, activation="relu")
        self.logits = keras.layers.Dense(classes)

    def call(self, x):
        return self.logits(self.hidden(self.flatten(x)))

    def get_config(self):
        return {**super().get_config(), "units": self.units, "classes": self.classes}


def build(config, input_shape, num_classes):
    return Configured(int(config["units"]), num_classes)
'''


def test_an_exported_model_of_an_unregistered_class_says_what_loading_it_needs(tmp_path, capsys, monkeypatch):
    """Keras saves a subclassed model with get_config(), but load_model finds its class only
    through custom_objects or registration: the export says so, and that load works."""
    import importlib
    import json
    import sys

    import keras
    import numpy as np

    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    (tmp_path / "configured_model.py").write_text(CONFIGURED_MODEL)
    path = write_experiment(tmp_path, DIGITS_200 + "model: {builder: 'configured_model:build'}\n")
    study = tmp_path / "study"
    assert hpo_here(capsys, "search", path, "--study-dir", study).returncode == 0
    target = tmp_path / "best.keras"
    exported = hpo_here(capsys, "best", study, "--export", target, "--trust-code")
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert ("loading it needs your class Configured: keras.models.load_model(path, custom_objects={'Configured': "
            "Configured}), or decorate it with @keras.saving.register_keras_serializable()") in exported.stdout
    record = json.loads(hpo_here(capsys, "best", study, "--json", "--export", tmp_path / "again.keras",
                                 "--trust-code").stdout)
    assert record["export"]["needs_classes"] == ["Configured"]
    module = importlib.import_module("configured_model")
    model = keras.models.load_model(target, custom_objects={"Configured": module.Configured})
    assert model.predict(np.ones((2, 8, 8), "float32"), verbose=0).shape == (2, 10)
