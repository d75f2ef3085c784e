"""training.loss, training.metrics and search.objective: names, directions, from_logits, the
refusals of bad values (the CLI's exit 2 for them: tests/support/bad_inputs.py), and two
searches through the real CLI (a regression ranked by val_mae, a sigmoid binary classifier
ranked by val_auc)."""

import json

import numpy as np
import pytest

from hpo import metric_names
from hpo.config import TrainingConfig, binding_differences, experiment_from_dict
from hpo.errors import ConfigError
from hpo.study import Study
from tests.support.cli import hpo_here
from tests.support.experiments import REGRESSION

BINARY = """\
name: binary
seed: 0
data:      {dataset: "tests.support.loss_tasks:binary", validation_split: 0.25, test_split: 0.1}
model:     {builder: "tests.support.loss_tasks:sigmoid_mlp"}
space:
  units:         {type: int,    low: 8,    high: 32}
  learning_rate: {type: float,  low: 1e-2, high: 5e-2, log: true}
search:    {algorithm: random, objective: val_auc, min_budget: 3, max_budget: 3, max_trials: 2}
training:  {loss: binary_crossentropy, metrics: [accuracy, auc, precision, recall], batch_size: 32}
"""


def base(**training):
    return {"name": "t", "data": {"dataset": "digits"}, "space": {"units": {"type": "int", "low": 8, "high": 16}},
            "training": training}


# --- names and directions -------------------------------------------------------------------

@pytest.mark.parametrize("objective, direction", [
    ("val_accuracy", "maximize"), ("accuracy", "maximize"), ("val_auc", "maximize"), ("precision", "maximize"),
    ("val_recall", "maximize"), ("val_binary_accuracy", "maximize"), ("r2_score", "maximize"),
    ("val_top_k_categorical_accuracy", "maximize"),
    ("loss", "minimize"), ("val_loss", "minimize"), ("val_mae", "minimize"), ("mse", "minimize"),
    ("val_root_mean_squared_error", "minimize"), ("val_mean_absolute_percentage_error", "minimize"),
    ("val_binary_crossentropy", "minimize"), ("half_absolute_error", "minimize")])
def test_direction_is_inferred_as_keras_tuner_infers_it(objective, direction):
    assert metric_names.infer_direction(objective) == direction


def test_the_direction_follows_the_objective_and_search_direction_overrides():
    raw = base(metrics=["mae"])
    raw["search"] = {"objective": "val_mae"}
    assert experiment_from_dict(raw).search.direction == "minimize"
    raw["search"] = {"objective": "val_mae", "direction": "maximize"}
    assert experiment_from_dict(raw).search.direction == "maximize"
    assert experiment_from_dict(base()).search.direction == "maximize"        # val_accuracy, as before


def test_every_listed_identifier_is_one_keras_accepts():
    import keras
    for name in metric_names.LOSSES:
        assert callable(keras.losses.get(name)), name
    for name in metric_names.METRICS:
        # 'acc' is compile()'s short name for 'accuracy' (keras.metrics.get knows only the long one)
        assert keras.metrics.get("accuracy" if name == "acc" else name) is not None, name


def test_objectives_are_the_loss_and_the_metrics_with_and_without_val():
    assert metric_names.objective_names(("mae", "pkg.mod:my_score")) == (
        "loss", "mae", "my_score", "val_loss", "val_mae", "val_my_score")
    assert metric_names.objective_names(TrainingConfig().metrics) == ("loss", "accuracy", "val_loss", "val_accuracy")


@pytest.mark.parametrize("training, fragment", [
    ({"loss": "mean_sqared_error"}, "did you mean 'mean_squared_error'"),
    ({"loss": "nonsense"}, "expected one of"),
    ({"metrics": ["acuracy"]}, "did you mean 'accuracy'"),
    ({"metrics": ["mae", "mae"]}, "both be logged as 'mae'"),
    ({"metrics": "mae"}, "expected a list"),
    ({"metrics": ["tests.support.loss_tasks:no_such_function"]}, "has no function"),
])
def test_unknown_losses_and_metrics_are_config_errors(training, fragment):
    with pytest.raises(ConfigError, match="training") as err:
        experiment_from_dict(base(**training))
    assert fragment in str(err.value)


def test_a_study_made_before_the_keys_existed_resumes_at_their_defaults():
    current = experiment_from_dict(base()).to_dict()
    stored = json.loads(json.dumps(current))
    del stored["training"]["loss"], stored["training"]["metrics"]
    assert binding_differences(stored, current) == []
    changed = experiment_from_dict(base(loss="mse", metrics=["mae"])).to_dict()
    assert len(binding_differences(stored, changed)) == 2


# --- from_logits ----------------------------------------------------------------------------

def test_from_logits_follows_the_output_activation():
    from hpo.models import get_builder
    from hpo.training.loss_metrics import output_activation
    from tests.support import loss_tasks

    assert output_activation(loss_tasks.linear_output_mlp({}, (8,), 1)) is None
    assert output_activation(loss_tasks.sigmoid_mlp({}, (8,), 1)) == "sigmoid"
    assert output_activation(loss_tasks.softmax_mlp({}, (8,), 3)) == "softmax"
    mlp = get_builder("mlp")({"layers": 1, "units": 8, "dropout": 0.0}, (8,), 3)
    assert output_activation(mlp) is None


def test_a_softmax_model_is_scored_on_its_probabilities_without_a_keras_warning():
    import warnings

    import keras

    from hpo.training.loss_metrics import LossAndMetrics
    from tests.support import loss_tasks

    model = loss_tasks.softmax_mlp({}, (8,), 3)
    x = np.random.default_rng(0).normal(size=(16, 8)).astype("float32")
    y = np.arange(16, dtype="int32") % 3
    measures = LossAndMetrics("sparse_categorical_crossentropy", ["accuracy"], model, y[:2])
    assert not measures.from_logits
    probabilities = model(x).numpy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mean = float(measures.mean_loss(y, model(x)))
    assert not [w for w in caught if "from_logits" in str(w.message)]
    expected = -np.mean(np.log(probabilities[np.arange(16), y]))
    assert mean == pytest.approx(expected, rel=1e-5)
    logits = LossAndMetrics("sparse_categorical_crossentropy", [], loss_tasks.linear_output_mlp({}, (8,), 1), y[:2])
    assert logits.from_logits
    measures.update(measures.val_metrics, y, model(x))
    accuracy = measures.results(validation=True)["accuracy"]
    assert accuracy == pytest.approx(np.mean(probabilities.argmax(-1) == y))
    assert keras.metrics.SparseCategoricalAccuracy   # "accuracy" resolved as compile resolves it


def test_fusion_refuses_what_its_step_does_not_compute():
    from hpo.fusion.program import fusable, unfusable_measures
    from tests.support import loss_tasks

    assert unfusable_measures(TrainingConfig()) is None
    assert "training.loss 'mse'" in unfusable_measures(TrainingConfig(loss="mse"))
    assert "training.metrics" in unfusable_measures(TrainingConfig(metrics=("accuracy", "auc")))
    assert "softmax" in fusable(loss_tasks.softmax_mlp({}, (8,), 3), {"optimizer": "adam"})


# --- searches through the CLI ---------------------------------------------------------------

def test_referenced_loss_and_metric_classes_compile_into_a_model_keras_can_save(tmp_path):
    """`hpo best --export` compiles the exported model with them: a class handed to Keras's
    compile trains, but saving then calls `get_config` on the class itself."""
    from hpo.training.loss_metrics import keras_loss, keras_metric
    from tests.support import loss_tasks
    model = loss_tasks.linear_output_mlp({}, (8,), 1)
    model.compile(optimizer="adam", loss=keras_loss("tests.support.loss_tasks:HalfSquaredError", model),
                  metrics=[keras_metric("tests.support.loss_tasks:LargestError"), keras_metric("mae"),
                           keras_metric("tests.support.loss_tasks:half_absolute_error")])
    x, y, _ = loss_tasks.regression(samples=32)
    model.evaluate(x, y, verbose=0)
    model.save(tmp_path / "model.keras")
    assert (tmp_path / "model.keras").stat().st_size > 0


@pytest.mark.slow
def test_a_regression_ranked_by_val_mae(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    experiment = tmp_path / "regression.yaml"
    experiment.write_text(REGRESSION.format(objective="val_mae"))
    study_dir = tmp_path / "study"
    done = hpo_here(capsys, "search", str(experiment), "--study-dir", str(study_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "val_mae (minimize)" in done.stdout
    study = Study.open(study_dir, read_only=True)
    assert study.experiment()["search"]["direction"] == "minimize"
    trials = study.trials()
    assert len(trials) == 3 and all(t.state.value == "complete" for t in trials)
    from tests.support import loss_tasks
    y_spread = float(np.std(loss_tasks.regression()[1]))
    for trial in trials:
        epochs = [m for _, _, m in study.epochs(trial.trial_id)]
        assert len(epochs) == 3
        for metrics in epochs:
            assert {"loss", "mae", "half_absolute_error", "val_loss", "val_mae",
                    "val_half_absolute_error"} <= set(metrics)
            assert "fused_trials" not in metrics      # training.fuse: 3, but fusion computes only the default
            assert metrics["half_absolute_error"] == pytest.approx(metrics["mae"] / 2, rel=1e-4)
        assert trial.value == pytest.approx(epochs[-1]["val_mae"])
        assert epochs[-1]["val_loss"] < epochs[0]["val_loss"]          # it learns
    best = min(trials, key=lambda t: t.value)
    assert best.value < 0.5 * y_spread          # far better than predicting the mean

    exported = json.loads(hpo_here(capsys, "export", str(study_dir), "--format", "json").stdout)
    assert all("val_mae" in e for row in exported for e in row["epochs"])

    tb = study_dir / "tensorboard"
    run = EventAccumulator(str(tb / f"trial_{best.lineage:04d}"), size_guidance={"scalars": 0, "tensors": 0}).Reload()
    tags = set(run.Tags()["scalars"]) | set(run.Tags()["tensors"])
    assert {"val_mae", "mae", "val_half_absolute_error"} <= tags
    search = EventAccumulator(str(tb / "search"), size_guidance={"tensors": 0}).Reload()
    content = search.SummaryMetadata("_hparams_/experiment").plugin_data.content
    metric_tags = [m.name.tag for m in plugin_data_pb2.HParamsPluginData.FromString(content).experiment.metric_infos]
    assert {"val_mae", "val_half_absolute_error", "val_loss", "mae"} <= set(metric_tags)

    # The exported model is scored with the experiment's metrics on the held-out test split.
    model_path = tmp_path / "best.keras"
    done = hpo_here(capsys, "best", study_dir, "--export", model_path, "--experiment", experiment, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    export = json.loads(done.stdout)["export"]
    assert set(export["test_metrics"]) == {"mae", "half_absolute_error"} and export["test_accuracy"] is None
    import keras

    from hpo.config import DataConfig
    from hpo.data import split
    from tests.support import loss_tasks
    x, y, _ = loss_tasks.regression()
    test = split("r", "", x, y, DataConfig(dataset="r", validation_split=0.25, test_split=0.1), seed=0)
    predicted = keras.models.load_model(model_path, compile=False).predict(test.x_test, verbose=0)[:, 0]
    assert export["test_metrics"]["mae"] == pytest.approx(float(np.mean(np.abs(predicted - test.y_test))), rel=1e-4)

    assert hpo_here(capsys, "report", str(study_dir)).returncode == 0
    page = (study_dir / "report" / "report.html").read_text()
    assert "<b>val_mae</b> (minimize)" in page


@pytest.mark.slow
def test_a_sigmoid_classifier_ranked_by_val_auc(tmp_path, capsys, recwarn):
    experiment = tmp_path / "binary.yaml"
    experiment.write_text(BINARY)
    study_dir = tmp_path / "study"
    done = hpo_here(capsys, "search", str(experiment), "--study-dir", str(study_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert not [w for w in recwarn if "from_logits" in str(w.message)]   # Keras's warning about a probability output
    study = Study.open(study_dir, read_only=True)
    assert study.experiment()["search"]["direction"] == "maximize"
    trials = study.trials()
    assert len(trials) == 2 and all(t.state.value == "complete" for t in trials)
    for trial in trials:
        last = [m for _, _, m in study.epochs(trial.trial_id)][-1]
        assert trial.value == pytest.approx(last["val_auc"])
        for name in ("accuracy", "auc", "precision", "recall"):
            assert 0.0 <= last[name] <= 1.0 and 0.0 <= last[f"val_{name}"] <= 1.0
    # A linearly separable problem: a few epochs rank far above chance (AUC 0.5).
    assert max(t.value for t in trials) > 0.85
