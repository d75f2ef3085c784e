"""A space where half the configurations fail (issue 59, case 6): `build_model` raises for
units > 128. Keras Tuner's default of three consecutive failures applies, and the search
still runs all its trials, whatever the seed: the searcher's model counts a failed
configuration as the worst result, and a new config whose nearest finished config failed is
drawn again (`hpo.search.surrogates.failure_neighbours`), so the initial design stops landing in the
failing half as soon as one config has worked."""

import numpy as np
import pytest

import hpo.keras_tuner as kt


@pytest.fixture(scope="module")
def tiny():
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 8)).astype("float32"), rng.integers(0, 2, 64)


def fails_above_128_units(hp):
    """The issue's space: half of the values of `units` fail to build."""
    import keras
    units = hp.Int("units", 32, 256, step=32)
    if units > 128:
        raise ValueError(f"units={units} is more than this layer takes")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(units, activation="relu"),
                              keras.layers.Dense(2, activation="softmax")])
    model.compile(keras.optimizers.Adam(hp.Float("lr", 1e-3, 1e-1, sampling="log")),
                  "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_space_where_half_the_configurations_fail_finishes_its_trials(tmp_path, tiny, seed):
    x, y = tiny
    tuner = kt.BayesianOptimization(fails_above_128_units, objective="val_accuracy", max_trials=20, seed=seed,
                                    directory=str(tmp_path), project_name="p")
    tuner.search(x, y, validation_data=(x, y), epochs=1, verbose=0)
    trials = [tuner.oracle.trials[k] for k in sorted(tuner.oracle.trials)]
    assert len(trials) == 20 and tuner.summary_.stopped_because == "max_trials"
    failed = [t for t in trials if t.status == "FAILED"]
    assert all(t.hyperparameters.values["units"] > 128 for t in failed)
    assert all(t.hyperparameters.values["units"] <= 128 for t in trials if t.status == "COMPLETED")
    # Once results are in, the failing half is proposed less often than a uniform draw lands
    # there (half the time).
    assert sum(t.status == "FAILED" for t in trials[10:]) <= 4, [t.status for t in trials]


def nan_loss(hp):
    """Builds (so the search starts) and trains to a NaN loss: every trial fails."""
    import keras
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(hp.Int("units", 4, 8))(inputs)
    poisoned = keras.layers.Lambda(lambda t: t * float("nan"))(hidden)
    model = keras.Model(inputs, keras.layers.Dense(2)(poisoned))
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


@pytest.mark.slow
def test_a_search_whose_every_trial_failed_says_so_at_its_end(tmp_path, tiny, monkeypatch):
    """Fewer trials than max_consecutive_failed_trials: the search ends at max_trials, and its
    last word says that nothing completed and why, instead of ending as if it had results."""
    import hpo.tuner.tuner

    warned = []
    monkeypatch.setattr(hpo.tuner.tuner.log, "warning", lambda message, *args: warned.append(message % args))
    x, y = tiny
    tuner = kt.RandomSearch(nan_loss, objective="val_accuracy", max_trials=2, seed=0, directory=str(tmp_path),
                            project_name="p")
    tuner.search(x, y, validation_data=(x, y), epochs=1, verbose=0)
    assert tuner.summary_.stopped_because == "max_trials" and tuner.get_best_hyperparameters() == []
    said = [message for message in warned if message.startswith("no trial has completed")]
    assert said == [f"no trial has completed: 2 of the study's 2 failed (the last error: TrialFailed: training loss "
                    f"became nan in epoch 1), so get_best_models and get_best_hyperparameters return nothing; "
                    f"`hpo status {tmp_path / 'p'}` shows each trial's error"], warned
