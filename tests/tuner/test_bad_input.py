"""Bad input is a ValueError before any study file is written; a build failing on some
configs fails those trials and the search goes on."""

import pytest

import hpo.keras_tuner as kt
from tests.tuner.conftest import small_mlp


def search(tuner, digits, **kwargs):
    x, y, xv, yv = digits
    arguments = {"validation_data": (xv, yv), "epochs": 1, "verbose": 0, **kwargs}
    tuner.search(x, y, **arguments)


def never_builds(hp):
    hp.Int("units", 8, 16)
    raise RuntimeError("cannot build this")


def no_hyperparameters(hp):
    return small_mlp(kt.HyperParameters())


def adagrad(hp):
    import keras
    model = small_mlp(hp)
    model.compile(keras.optimizers.Adagrad(), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def adam_with_weight_decay(hp):
    import keras
    model = small_mlp(hp)
    model.compile(keras.optimizers.Adam(weight_decay=0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def sgd_with_weight_decay(hp):
    import keras
    model = small_mlp(hp)
    model.compile(keras.optimizers.SGD(weight_decay=0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def wrong_input_shape(hp):
    import keras
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(hp.Choice("units", [16, 32])), keras.layers.Dense(10)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


@pytest.mark.parametrize("build, kwargs, message", [
    (never_builds, {}, "build_model failed on the default hyperparameters: RuntimeError: cannot build this"),
    (no_hyperparameters, {}, "the search space is empty"),
    (adagrad, {}, "optimizer Adagrad is not supported"),
    (adam_with_weight_decay, {}, "Adam(weight_decay=...) is not supported by hpo's trainer; use AdamW"),
    (sgd_with_weight_decay, {}, "SGD(weight_decay=...) is not supported by hpo's trainer; leave weight_decay"),
    (small_mlp, {"objective": "val_auc"}, "objective 'val_auc' is not a metric the model logs; expected one of"),
    # Keras's own words, not its 'Exception encountered when calling Sequential.call().' line.
    (wrong_input_shape, {}, "the model build_model returns cannot take the data given to search: ValueError: "
                            "Input 0 .* of layer 'dense.*' is incompatible with the layer: expected axis -1"),
])
def test_a_search_that_cannot_work_is_refused_before_any_file(tmp_path, digits, build, kwargs, message):
    tuner = kt.RandomSearch(build, max_trials=2, directory=str(tmp_path), project_name="p",
                            **{"objective": "val_accuracy", **kwargs})
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        search(tuner, digits)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"validation_data": None}, "needs validation data"),
    ({"validation_data": None, "validation_split": 0.999}, "validation_split=0.999 of 600 examples leaves"),
    ({"class_weight": {0: 2.0}}, "search(class_weight=...) is a model.fit argument"),
    ({"callbacks": ["not a callback"]}, "callback str is not supported"),
])
def test_data_and_fit_arguments_hpo_cannot_use_are_named(tmp_path, digits, kwargs, message):
    tuner = kt.RandomSearch(small_mlp, objective="val_accuracy", max_trials=2, directory=str(tmp_path),
                            project_name="p")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        search(tuner, digits, **kwargs)
    assert not (tmp_path / "p").exists()


def test_keras_tuner_arguments_hpo_does_not_support_are_named():
    with pytest.raises(ValueError, match=r"Hyperband\(executions_per_trial=2\) is Keras Tuner API"):
        kt.Hyperband(small_mlp, objective="val_accuracy", executions_per_trial=2)
    with pytest.raises(ImportError, match="keras_tuner.GridSearch is Keras Tuner API"):
        _ = kt.GridSearch
    with pytest.raises(ImportError, match="keras_tuner.GridSearch is Keras Tuner API"):
        from hpo.keras_tuner import GridSearch  # noqa: F401


def test_a_build_failing_on_some_configs_fails_those_trials_and_the_search_goes_on(tmp_path, digits):
    def sometimes(hp):
        if hp.Choice("activation", ["relu", "broken"]) == "broken":
            raise kt.errors.FailedTrialError("no such activation")      # as Keras Tuner's scripts say it
        return small_mlp(hp)

    tuner = kt.RandomSearch(sometimes, objective="val_accuracy", max_trials=4, seed=3, directory=str(tmp_path),
                            project_name="p", max_consecutive_failed_trials=4)
    search(tuner, digits)
    trials = list(tuner.oracle.trials.values())
    failed = [t for t in trials if t.status == "FAILED"]
    assert len(trials) == 4 and failed and len(failed) < 4
    assert all(t.hyperparameters.values["activation"] == "broken" for t in failed)
    assert all("no such activation" in t.message for t in failed)


def test_early_stopping_becomes_the_trainers_and_tensorboard_is_the_studys_own():
    import keras

    from hpo.tuner.driver import early_stopping_of
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, min_delta=0.01)
    assert early_stopping_of([stop, keras.callbacks.TensorBoard()]) == {"monitor": "val_loss", "patience": 2,
                                                                         "min_delta": 0.01}
    # restore_best_weights is what keeping the objective's best epoch does, and nothing else is.
    restoring = keras.callbacks.EarlyStopping(monitor="val_accuracy", restore_best_weights=True)
    assert early_stopping_of([restoring], best_epoch_of="val_accuracy")["monitor"] == "val_accuracy"
    with pytest.raises(ValueError, match="keeps its best epoch of 'val_loss', not of 'val_accuracy'"):
        early_stopping_of([restoring], best_epoch_of="val_loss")
    with pytest.raises(ValueError, match="keeps each trial's last epoch"):
        early_stopping_of([restoring])
    # A mode that agrees with the inferred direction is the same stopping; one that contradicts
    # it would be silently turned round.
    assert early_stopping_of([keras.callbacks.EarlyStopping(monitor="val_mae", mode="min")])["monitor"] == "val_mae"
    with pytest.raises(ValueError, match="mode='max'.*reads 'val_mae' as minimized.*a measure that is maximized"):
        early_stopping_of([keras.callbacks.EarlyStopping(monitor="val_mae", mode="max")])
    with pytest.raises(ValueError, match="baseline"):
        early_stopping_of([keras.callbacks.EarlyStopping(baseline=0.5)])
    with pytest.raises(ValueError, match="callback CSVLogger is not supported"):
        early_stopping_of([keras.callbacks.CSVLogger("log.csv")])


def test_keras_metric_objects_at_their_defaults_read_as_their_names_and_other_settings_are_refused():
    """Keras numbers a repeated default name (a second AUC() is 'auc_1'); a metric with other
    settings than its name string's (AUC(curve='PR'), Precision(thresholds=0.7)) is another
    metric and is refused rather than trained as the default one."""
    import keras

    from hpo.tuner.compiled_model import UnsupportedModel, loss_and_metrics

    def compiled(*metrics):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
        model.compile("adam", "binary_crossentropy", metrics=list(metrics))
        return model
    assert loss_and_metrics(compiled(keras.metrics.AUC(name="auc"), keras.metrics.Precision(),
                                     keras.metrics.Recall()))[1] == ("auc", "precision", "recall")
    keras.metrics.AUC()                             # an earlier one takes the default name
    assert loss_and_metrics(compiled(keras.metrics.AUC()))[1] == ("auc",)
    for metric in (keras.metrics.AUC(curve="PR"), keras.metrics.Precision(thresholds=0.7),
                   keras.metrics.Recall(name="rec"), keras.metrics.PrecisionAtRecall(0.5)):
        with pytest.raises(UnsupportedModel, match="is not supported by the Keras Tuner face"):
            loss_and_metrics(compiled(metric))


def test_keras_loss_objects_read_as_their_names_where_every_other_setting_is_its_default():
    """A loss class passes all its options on, defaults included (BinaryCrossentropy's
    label_smoothing=0.0, Huber's delta=1.0): those are the named loss. Another value is
    another loss, refused rather than trained as the default one."""
    import keras

    from hpo.tuner.compiled_model import UnsupportedModel, loss_and_metrics

    def compiled(loss, activation=None):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation=activation)])
        model.compile("adam", loss)
        return model
    assert loss_and_metrics(compiled(keras.losses.BinaryCrossentropy(from_logits=True)))[0] == "binary_crossentropy"
    assert loss_and_metrics(compiled(keras.losses.BinaryCrossentropy(), "sigmoid"))[0] == "binary_crossentropy"
    assert loss_and_metrics(compiled(keras.losses.Huber()))[0] == "huber"
    assert loss_and_metrics(compiled(keras.losses.MeanSquaredError(reduction="mean")))[0] == "mean_squared_error"
    for loss, activation in ((keras.losses.Huber(delta=0.3), None),
                             (keras.losses.BinaryCrossentropy(label_smoothing=0.1), "sigmoid")):
        with pytest.raises(UnsupportedModel, match="is not supported by hpo's trainer"):
            loss_and_metrics(compiled(loss, activation))


def test_a_string_cross_entropy_over_a_linear_output_is_noted_before_the_search():
    """hpo trains it as logits, as the output says; Keras's compile of the string reads
    probabilities, so get_best_models' loss would differ from the trial's: said once."""
    import logging

    import keras

    from hpo.tuner.tuner import _note_logits_loss

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger("hpo.tuner")
    logger.addHandler(handler)
    try:
        for loss in ("sparse_categorical_crossentropy", keras.losses.SparseCategoricalCrossentropy(from_logits=True)):
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
            model.compile("adam", loss)
            _note_logits_loss(model, "sparse_categorical_crossentropy")
    finally:
        logger.removeHandler(handler)
    assert len(said) == 1 and "from_logits=True" in said[0]
    assert "keras.losses.SparseCategoricalCrossentropy(from_logits=True)" in said[0]
