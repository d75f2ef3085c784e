"""Our searchers as Keras Tuner oracles inside Keras Tuner's own loop (`hpo.keras_tuner.oracles`),
driving a real kt tuner on digits; their space is the face's conversion."""

import keras
import keras_tuner as kt
import numpy as np
import pytest

import hpo.keras_tuner.oracles as hkt
from hpo.space import ChoiceParam, FloatParam, IntParam, SearchSpace
from hpo.tuner.discovery import discover
from hpo.tuner.keras_tuner_terms import STEP_GRID_LIMIT

# Slow (Keras Tuner searches of several trials each): left out of `-m "not slow"`.
pytestmark = pytest.mark.slow


def test_keras_tuner_hyperparameters_become_our_space():
    hp = kt.HyperParameters()
    hp.Int("units", 16, 64, step=16)
    hp.Int("filters", 8, 256, sampling="log")
    hp.Float("dropout", 0.0, 0.5)
    hp.Float("ratio", 0.0, 1.0, step=0.25)
    hp.Float("lr", 1e-4, 1e-1, sampling="log")
    hp.Boolean("batchnorm")
    hp.Fixed("epochs_hint", 3)
    optimizer = hp.Choice("optimizer", ["adam", "sgd"])
    with hp.conditional_scope("optimizer", ["sgd"]):
        hp.Float("momentum", 0.0, 0.9)
    space = hkt.space_from_hyperparameters(hp)
    assert space.names == ["units", "filters", "dropout", "ratio", "lr", "batchnorm", "optimizer", "momentum"] or \
        set(space.names) == {"units", "filters", "dropout", "ratio", "lr", "batchnorm", "optimizer", "momentum"}
    assert isinstance(space["units"], ChoiceParam) and space["units"].values == (16, 32, 48, 64)
    assert isinstance(space["filters"], IntParam) and space["filters"].log
    assert isinstance(space["ratio"], ChoiceParam) and space["ratio"].values == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert isinstance(space["lr"], FloatParam) and space["lr"].log
    assert space["batchnorm"].values == (False, True)
    assert dict(space["momentum"].when) == {"optimizer": ("sgd",)}
    assert optimizer == "adam"


def declarations(hp):
    """One set of declarations, run on Keras Tuner's HyperParameters and on the face's."""
    hp.Int("units", 16, 64, step=16)
    hp.Int("layers", 1, 40)
    hp.Float("ratio", 0.0, 1.0, step=0.25)
    hp.Float("lr", 1e-4, 1e-1, sampling="log", default=1e-3)
    hp.Boolean("batchnorm", default=True)
    hp.Fixed("epochs_hint", 3)
    hp.Choice("optimizer", ["adam", "sgd"], default="sgd")
    with hp.conditional_scope("optimizer", ["sgd"]):
        hp.Float("momentum", 0.0, 0.9)


def test_the_oracles_space_is_the_faces_conversion():
    theirs = kt.HyperParameters()
    declarations(theirs)
    assert hkt.space_from_hyperparameters(theirs).to_dict() == \
        SearchSpace.from_dict(discover(declarations).space_dict()).to_dict()


@pytest.mark.parametrize("declare, message", [
    (lambda hp: hp.Int("width", 0, 2 * STEP_GRID_LIMIT, step=2),
     rf"'width': a stepped range of {STEP_GRID_LIMIT + 1} values is not supported \(at most {STEP_GRID_LIMIT}\)"),
    (lambda hp: hp.Int("filters", 8, 256, step=2, sampling="log"), "a step with sampling='log'"),
    (lambda hp: hp.Float("lr", 1e-4, 1e-1, sampling="reverse_log"), "'reverse_log' has no hpo counterpart"),
])
def test_what_the_face_refuses_the_oracles_refuse_with_the_same_words(declare, message):
    theirs = kt.HyperParameters()
    declare(theirs)
    with pytest.raises(ValueError, match=message):
        hkt.space_from_hyperparameters(theirs)
    with pytest.raises(ValueError, match=message):
        discover(declare).space_dict()


def test_the_tuner_classes_of_the_faces_names_are_the_faces_only():
    for name, oracle in (("BOHB", "BOHBOracle"), ("Hyperband", "HyperbandOracle"), ("ASHA", "ASHAOracle")):
        with pytest.raises(ImportError, match=rf"for hpo's engine use hpo.keras_tuner.{name}; .*"
                                              rf"OracleTuner\(hypermodel, oracle={oracle}\("):
            getattr(hkt, name)
    with pytest.raises(ImportError, match="is OracleTuner"):
        hkt.Tuner  # noqa: B018
    # `from ... import` keeps the message (an AttributeError would become Python's bare one).
    with pytest.raises(ImportError, match="for hpo's engine use hpo.keras_tuner.BOHB"):
        from hpo.keras_tuner.oracles import BOHB  # noqa: F401


@pytest.fixture(autouse=True)
def seeded_weights():
    # The oracle is seeded by the tuner; this seeds weight init too, so accuracy bars below see one draw, not many.
    keras.utils.set_random_seed(0)


def build(hp):
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Int("units", 16, 48, step=16),
                                                                     activation="relu"), keras.layers.Dense(10)])
    optimizer = hp.Choice("optimizer", ["adam", "sgd"])
    if optimizer == "sgd":
        with hp.conditional_scope("optimizer", ["sgd"]):
            opt = keras.optimizers.SGD(hp.Float("lr_sgd", 1e-2, 1e-1, sampling="log"), momentum=0.9)
    else:
        opt = keras.optimizers.Adam(1e-2)
    model.compile(opt, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


@pytest.fixture(scope="module")
def digits_arrays():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y


def bohb(objective, **arguments):
    return hkt.BOHBOracle(kt.Objective(objective, "max"), **arguments)


def search(tuner, data):
    x, y = data
    tuner.search(x[:1200], y[:1200], validation_data=(x[1200:], y[1200:]), batch_size=64, verbose=0)


def test_a_kt_search_runs_hyperband_budgets_and_continues_promotions(tmp_path, digits_arrays):
    """BOHB's oracle in Keras Tuner's loop (HyperbandOracle is the same oracle over our Hyperband)."""
    max_epochs, budgets = 3, [1, 3]
    starting_weights = {}

    class Spy(hkt.OracleTuner):
        def _build_hypermodel(self, hp):
            model = super()._build_hypermodel(hp)
            if "tuner/trial_id" in hp.values:
                starting_weights[hp.values["tuner/trial_id"]] = model.get_weights()
            return model

    tuner = Spy(build, bohb("val_accuracy", max_epochs=max_epochs, factor=3, seed=0), directory=str(tmp_path),
                project_name="p")
    search(tuner, digits_arrays)
    trials = list(tuner.oracle.trials.values())
    assert len(trials) == tuner.oracle.max_trials == tuner.oracle.searcher.n_asked
    assert all(t.status == "COMPLETED" for t in trials)
    epochs = sorted({t.hyperparameters.values["tuner/epochs"] for t in trials})
    assert epochs == budgets
    promoted = [t for t in trials if "tuner/trial_id" in t.hyperparameters.values]
    assert promoted and set(starting_weights) == {t.hyperparameters.values["tuner/trial_id"] for t in promoted}
    for child in promoted:
        parent = tuner.oracle.trials[child.hyperparameters.values["tuner/trial_id"]]
        assert child.hyperparameters.values["tuner/initial_epoch"] == parent.hyperparameters.values["tuner/epochs"]
        # The promotion started from the parent's checkpoint, not from fresh weights.
        saved = tuner.load_model(parent).get_weights()
        for started, kept in zip(starting_weights[parent.trial_id], saved):
            np.testing.assert_array_equal(started, kept)
    best = tuner.get_best_models(1)[0]
    x, y = digits_arrays
    assert best.evaluate(x[1200:], y[1200:], verbose=0)[1] > 0.8


def test_a_reloaded_tuner_replays_the_oracle_and_carries_on(tmp_path, digits_arrays):
    first = hkt.OracleTuner(build, bohb("val_accuracy", max_epochs=3, factor=3, seed=1), directory=str(tmp_path),
                            project_name="p")
    first.oracle.max_trials = 2
    search(first, digits_arrays)
    asked = [t.hyperparameters.values for t in first.oracle.trials.values()]
    second = hkt.OracleTuner(build, bohb("val_accuracy", max_epochs=3, factor=3, seed=1), directory=str(tmp_path),
                             project_name="p", overwrite=False)
    assert second.oracle.searcher.n_asked == 2      # the log was replayed into a fresh searcher
    second.oracle.max_trials = 4
    search(second, digits_arrays)
    trials = second.oracle.trials
    assert len(trials) == 4
    assert [trials[k].hyperparameters.values for k in sorted(trials)][:2] == asked
    for t in trials.values():
        parent = t.hyperparameters.values.get("tuner/trial_id")
        assert parent is None or parent in trials


@pytest.mark.parametrize("iterations", [1, 2, 3])
def test_bohb_oracle_trials_count_whole_iterations_with_one_climb(iterations):
    """Like kt.Hyperband, max_trials defaults to whole iterations: for BOHB the first holds
    the climbing bracket, the later ones Hyperband's brackets (27 epochs, factor 3: 89, then 69)."""
    from hpo.search import BOHB
    searcher = BOHB({"x": {"type": "float", "low": 0.0, "high": 1.0}}, min_budget=1, max_budget=27, eta=3)
    positions = range(iterations * len(searcher.brackets))
    jobs = sum(rung.n_configs for p in positions for rung in searcher._plan_at(p).rungs)
    oracle = hkt.BOHBOracle(objective="val_loss", max_epochs=27, factor=3, hyperband_iterations=iterations)
    assert oracle.max_trials == jobs == 89 + 69 * (iterations - 1)
