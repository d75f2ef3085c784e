"""`import hpo.keras_tuner as kt`: Keras Tuner's script, hpo's engine and study."""

import pytest

import hpo.keras_tuner as kt
from hpo.study import Study
from tests.tuner.conftest import conditional_cnn, small_mlp

# One worker searches the module's study; searches are in the slow set.
pytestmark = [pytest.mark.xdist_group("tuner_keras_tuner_face"), pytest.mark.slow]


@pytest.fixture(scope="module")
def cnn_search(tmp_path_factory, digits):
    directory = tmp_path_factory.mktemp("kt")
    tuner = kt.Hyperband(conditional_cnn, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                         directory=str(directory), project_name="cnn")
    x, y, xv, yv = digits
    tuner.search(x, y, validation_data=(xv, yv), batch_size=32, verbose=0)
    return tuner, directory / "cnn"


def test_a_branch_only_parameter_is_searched_and_carried_through_promotions(cnn_search, digits):
    tuner, _ = cnn_search
    trials = tuner.oracle.trials
    assert len(trials) == 6 and all(t.status == "COMPLETED" for t in trials.values())
    assert {t.budget for t in trials.values()} == {1, 3}
    deep = [t for t in trials.values() if t.hyperparameters.values["conv_layers"] == 2]
    assert deep and all("filters_1" in t.hyperparameters.values for t in deep)
    assert len({t.hyperparameters.values["filters_1"] for t in deep}) > 1         # searched, not a default
    promoted = [t for t in trials.values() if t.continues is not None]
    assert promoted and any(t.hyperparameters.values["conv_layers"] == 2 for t in promoted)
    for child in promoted:
        # The promotion builds its parent's full config, filters_1 included ...
        assert child.hyperparameters.values == trials[child.continues].hyperparameters.values
    # ... so its checkpoint loads into the model build_model makes, and scores what the trial logged.
    x, y, xv, yv = digits
    for child in promoted:
        model = tuner.load_model(child)
        accuracy = model.evaluate(xv, yv, verbose=0)[1]
        assert accuracy == pytest.approx(child.score, abs=1e-6)


def test_a_trial_is_scored_by_its_best_epoch_as_keras_tuner_scores_it(cnn_search):
    """get_best_models then loads that epoch's weights (checked against the score below)."""
    tuner, folder = cnn_search
    study = Study.open(folder, read_only=True)
    try:
        assert study.experiment()["training"]["keep_best_epoch"] is True
        for trial in tuner.oracle.trials.values():
            accuracies = [m["val_accuracy"] for _, _, m in study.epochs(int(trial.trial_id))]
            assert trial.score == max(accuracies)
    finally:
        study.close()


def test_best_models_and_hyperparameters_come_back_as_keras_tuner_gives_them(cnn_search, digits, capsys):
    tuner, _ = cnn_search
    best_hp = tuner.get_best_hyperparameters(1)[0]
    best_trial = tuner.oracle.get_best_trials(1)[0]
    assert best_hp.values == best_trial.hyperparameters.values and best_trial.budget == 3
    # Read as Keras Tuner's guides read it, by name.
    for name, value in best_hp.values.items():
        assert best_hp.get(name) == best_hp[name] == value and name in best_hp
    objective = tuner.oracle.objective
    assert objective == objective.name == "val_accuracy" and objective.direction == "max"
    assert best_trial.metrics.get_best_value("val_accuracy") == best_trial.score
    assert tuner.project_dir == str(tuner.folder)
    tuner.reload()
    model = tuner.get_best_models(1)[0]
    x, y, xv, yv = digits
    assert model.evaluate(xv, yv, verbose=0)[1] == pytest.approx(best_trial.score, abs=1e-6)
    fresh = tuner.hypermodel.build(best_hp)               # the usual "retrain the best" pattern
    assert [w.shape for w in fresh.get_weights()] == [w.shape for w in model.get_weights()]
    tuner.results_summary(2)
    tuner.search_space_summary()
    out = capsys.readouterr().out
    assert f"Trial {best_trial.trial_id}: val_accuracy" in out and "filters_1 (choice)" in out
    frame = tuner.results.to_pandas()
    assert len(frame) == 6 and "config.filters_1" in frame.columns


def test_the_tuner_directory_is_an_hpo_study(cnn_search, capsys):
    from tests.support.cli import hpo_here
    _, folder = cnn_search
    done = hpo_here(capsys, "status", folder)
    assert done.returncode == 0, done.stderr
    assert "objective val_accuracy" in done.stdout and done.stdout.count("complete") == 6
    one = hpo_here(capsys, "status", folder, "--trial", "0")
    assert one.returncode == 0 and "conv_layers" in one.stdout
    exported = hpo_here(capsys, "export", folder, "--format", "json")
    assert exported.returncode == 0 and '"filters_1"' in exported.stdout
    best = hpo_here(capsys, "best", folder)
    assert best.returncode == 0 and f"trial {tuner_best(cnn_search)}" in best.stdout.lower(), best.stdout
    report = hpo_here(capsys, "report", folder)
    assert report.returncode == 0, report.stderr
    assert "Parameter importance" in (folder / "report" / "report.html").read_text()
    # A model file needs build_model and the data, which live in the script: a clear refusal
    # that says what to do instead, and nothing written.
    refused = hpo_here(capsys, "best", folder, "--export", folder.parent / "best.keras")
    assert refused.returncode == 2 and "get_best_models(1)[0].save" in refused.stderr, refused.stderr
    assert not (folder.parent / "best.keras").exists()
    assert (folder / "tensorboard" / "search").is_dir() and (folder / "hpo.log").exists()
    log = (folder / "hpo.log").read_text()
    assert "compiled engine" in log          # which engine trained the trials, and why


def tuner_best(cnn_search) -> int:
    tuner, _ = cnn_search
    return int(tuner.oracle.get_best_trials(1)[0].trial_id)


def test_running_the_script_again_resumes_and_overwrite_moves_the_study_aside(cnn_search, digits):
    tuner, folder = cnn_search
    x, y, xv, yv = digits
    before = [t.hyperparameters.values for t in tuner.oracle.trials.values()]
    again = kt.Hyperband(conditional_cnn, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                         directory=str(folder.parent), project_name="cnn")
    again.search(x, y, validation_data=(xv, yv), batch_size=32, verbose=0)
    assert again.summary_.trials_finished_now == 0
    assert [t.hyperparameters.values for t in again.oracle.trials.values()] == before
    other_seed = kt.Hyperband(conditional_cnn, objective="val_accuracy", max_epochs=3, factor=3, seed=1,
                              directory=str(folder.parent), project_name="cnn")
    with pytest.raises(ValueError, match="overwrite=True"):
        other_seed.search(x, y, validation_data=(xv, yv), batch_size=32, verbose=0)
    fresh = kt.RandomSearch(small_mlp, objective="val_accuracy", max_trials=2, seed=0, overwrite=True,
                            directory=str(folder.parent), project_name="cnn")
    fresh.search(x, y, validation_data=(xv, yv), epochs=1, verbose=0)
    assert len(fresh.oracle.trials) == 2
    assert list(folder.parent.glob("cnn.old-*"))                   # the old study, moved aside
    assert len(Study.open(next(folder.parent.glob("cnn.old-*")), read_only=True).trials()) == 6


def test_random_search_trains_every_trial_for_the_epochs_given(tmp_path, digits):
    x, y, xv, yv = digits
    tuner = kt.RandomSearch(small_mlp, objective=kt.Objective("val_loss", "min"), max_trials=2, seed=0,
                            directory=str(tmp_path), project_name="r")
    tuner.search(x, y, validation_data=(xv, yv), epochs=2, verbose=0)
    trials = list(tuner.oracle.trials.values())
    assert len(trials) == 2 and {t.budget for t in trials} == {2}
    assert tuner.oracle.get_best_trials(1)[0].score == min(t.score for t in trials)


def test_bayesian_optimization_and_a_tf_data_search_run(tmp_path, digits):
    import tensorflow as tf
    x, y, xv, yv = digits
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    validation = tf.data.Dataset.from_tensor_slices((xv, yv)).batch(64)
    tuner = kt.BayesianOptimization(small_mlp, objective="val_accuracy", max_trials=2, seed=0,
                                    directory=str(tmp_path), project_name="b")
    tuner.search(train, validation_data=validation, epochs=1, verbose=0)
    trials = list(tuner.oracle.trials.values())
    assert len(trials) == 2 and all(t.status == "COMPLETED" for t in trials)


@pytest.mark.parametrize("task", ["regression", "one-hot"])
def test_float_and_one_hot_targets_search_with_the_loss_that_reads_them(tmp_path, digits, task):
    # Keras Tuner takes any targets its model's loss reads: the face checks the data as class
    # indices only under the default loss (sparse categorical cross-entropy).
    import keras
    x, y, xv, yv = digits
    if task == "regression":
        targets, validation, units, activation, loss, objective = (y / 9.0).astype("float32"), \
            (yv / 9.0).astype("float32"), 1, None, "mse", "val_mae"
    else:
        targets, validation, units, activation, loss, objective = keras.utils.to_categorical(y, 10), \
            keras.utils.to_categorical(yv, 10), 10, "softmax", "categorical_crossentropy", "val_accuracy"

    def build(hp):
        model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(hp.Choice("units", [8, 16]), activation="relu"),
                                  keras.layers.Dense(units, activation=activation)])
        model.compile("adam", loss, metrics=["mae" if task == "regression" else "accuracy"])
        return model

    tuner = kt.RandomSearch(build, objective=objective, max_trials=2, seed=0, directory=str(tmp_path),
                            project_name=task)
    tuner.search(x, targets, validation_data=(xv, validation), epochs=2, verbose=0)
    trials = list(tuner.oracle.trials.values())
    assert len(trials) == 2 and all(t.status == "COMPLETED" for t in trials)
    # The best model was trained on those targets: its validation loss is below an untrained
    # build's, and the oracle's score is Keras's own evaluation of it.
    best, fresh = tuner.get_best_models(1)[0], build(tuner.get_best_hyperparameters(1)[0])
    trained, untrained = (m.evaluate(xv, validation, verbose=0, return_dict=True) for m in (best, fresh))
    assert trained["loss"] < untrained["loss"]
    metric = "mae" if task == "regression" else "accuracy"
    assert tuner.oracle.get_best_trials(1)[0].score == pytest.approx(trained[metric], rel=1e-4)


def sequential_without_input(hp):
    """Keras Tuner's getting-started style: no keras.Input, the model gets its shape from the data."""
    import keras
    model = keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(hp.Choice("units", [16, 32]),
                                                                          activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def subclassed_model(hp):
    """A subclassed keras.Model without build(): its weights come on its first call."""
    import keras

    class TwoLayers(keras.Model):
        def __init__(self, units):
            super().__init__()
            self.flatten = keras.layers.Flatten()
            self.hidden = keras.layers.Dense(units, activation="relu")
            self.logits = keras.layers.Dense(10)

        def call(self, x):
            return self.logits(self.hidden(self.flatten(x)))
    model = TwoLayers(hp.Choice("units", [16, 32]))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  run_eagerly=True, steps_per_execution=4)
    return model


@pytest.mark.parametrize("build_model, runs_as", [(sequential_without_input, ("auto", 32)),
                                                   (subclassed_model, ("eager", 4))])
def test_a_model_without_an_input_trains_as_compiled_promotes_and_reloads_from_the_data_shape(
        tmp_path, digits, build_model, runs_as):
    """A Sequential without keras.Input, or a subclassed model without build(), has no weights
    until its first call: hpo builds it on the data's shape, as `fit` would on its first batch.
    The compile's run_eagerly and steps_per_execution (the subclassed model's) are the
    trainer's compile mode and steps per call."""
    x, y, xv, yv = digits
    tuner = kt.Hyperband(build_model, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                         directory=str(tmp_path), project_name="p")
    tuner.search(x, y, validation_data=(xv, yv), verbose=0)
    trials = list(tuner.oracle.trials.values())
    assert trials and all(t.status == "COMPLETED" for t in trials)
    assert any(t.continues is not None for t in trials)          # a promotion continued one
    study = Study.open(tmp_path / "p", read_only=True)
    training = study.experiment()["training"]
    study.close()
    assert (training["compile"], training["steps_per_call"]) == runs_as
    # A tuner of another process (no search here) rebuilds the best model from the study.
    reloaded = kt.Hyperband(build_model, objective="val_accuracy", max_epochs=3, factor=3, seed=0,
                            directory=str(tmp_path), project_name="p")
    best = reloaded.oracle.get_best_trials(1)[0]
    model = reloaded.get_best_models(1)[0]
    assert model.evaluate(xv, yv, verbose=0)[1] == pytest.approx(best.score, abs=1e-6)


@pytest.mark.parametrize("options, expected", [
    ({}, {"compile": "auto"}),
    ({"run_eagerly": True}, {"compile": "eager"}),
    ({"jit_compile": True, "steps_per_execution": 8}, {"compile": "xla", "steps_per_call": 8}),
    # Keras resolves its default to False on a CPU-only machine: only the arguments tell the two apart.
    ({"jit_compile": False}, {"compile": "graph"}),
    ({"jit_compile": "auto"}, {"compile": "auto"}),
])
def test_a_models_compile_options_are_the_trainers_compile_mode(options, expected):
    import keras

    from hpo.tuner.compiled_model import compile_arguments_recorded, execution_settings

    before = dict(vars(keras.Model))
    with compile_arguments_recorded() as given:
        inputs = keras.Input((4,))
        model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
        model.compile("adam", "mse", **options)
    assert execution_settings(model, given[id(model)]) == expected
    assert dict(vars(keras.Model)) == before          # Keras's compile is itself again
