"""`hpo.Tuner`: build(config) and a space, on the same implementation as the Keras Tuner face."""

import pytest

import hpo

pytestmark = pytest.mark.slow      # searches, in the slow set


def build(config):
    import keras
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(config["units"], activation="relu"), keras.layers.Dense(10)])
    model.compile(keras.optimizers.SGD(config["learning_rate"], momentum=0.9),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


SPACE = {"units": {"type": "choice", "values": [16, 32]},
         "learning_rate": {"type": "float", "low": 0.01, "high": 0.1, "log": True}}


def test_a_native_tuner_searches_resumes_with_more_trials_and_reads_its_results(tmp_path, digits):
    x, y, xv, yv = digits
    tuner = hpo.Tuner(build, SPACE, objective="val_loss", algorithm="bohb", max_epochs=3, max_trials=2, seed=0,
                      directory=tmp_path, project_name="native")
    assert tuner.direction == "minimize"
    tuner.search(x, y, validation_split=0.25, batch_size=64, verbose=0)
    assert len(tuner.results) == 2
    more = hpo.Tuner(build, SPACE, objective="val_loss", algorithm="bohb", max_epochs=3, max_trials=3, seed=0,
                     directory=tmp_path, project_name="native")
    more.search(x, y, validation_split=0.25, batch_size=64, verbose=0)
    rows = more.results
    assert len(rows) == 3 and more.summary_.trials_finished_now == 1        # resumed, not restarted
    assert [r["config.units"] for r in rows[:2]] == [r["config.units"] for r in tuner.results]
    best = more.get_best_models(1)[0]
    trial = more.oracle.get_best_trials(1)[0]
    assert best.evaluate(x[450:], y[450:], verbose=0)[0] == pytest.approx(trial.score, rel=1e-5)
    assert more.plot() is not None
