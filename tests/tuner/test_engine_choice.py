"""The compiled model is trained by hpo's compiled step where that reproduces fit, else by fit."""

import pytest

import hpo.keras_tuner as kt

pytestmark = pytest.mark.slow      # searches, in the slow set


def own_train_step(hp):
    import keras

    class OwnStep(keras.Model):
        def train_step(self, data):
            return super().train_step(data)

    inputs = keras.Input((8, 8, 1))
    hidden = keras.layers.Dense(hp.Choice("units", [8, 16]), activation="relu")(keras.layers.Flatten()(inputs))
    model = OwnStep(inputs, keras.layers.Dense(10)(hidden))
    model.compile(keras.optimizers.RMSprop(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def test_a_model_with_its_own_train_step_trains_with_fit_and_the_log_says_why(tmp_path, digits):
    x, y, xv, yv = digits
    tuner = kt.RandomSearch(own_train_step, objective="val_accuracy", max_trials=1, seed=0,
                            directory=str(tmp_path), project_name="p")
    tuner.search(x, y, validation_data=(xv, yv), epochs=1, verbose=0)
    (trial,) = tuner.oracle.trials.values()
    assert trial.status == "COMPLETED" and trial.score > 0.3
    log = (tmp_path / "p" / "hpo.log").read_text()
    assert "fit engine: auto: the model overrides train_step" in log
