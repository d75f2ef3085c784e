"""The space of a build_model(hp) is found by running it over its branches (no TensorFlow)."""

import logging

import pytest

from hpo.space import SearchSpace
from hpo.tuner.discovery import discover
from hpo.tuner.hyperparameters import HyperParameters


def branching_build(hp):
    kind = hp.Choice("kind", ["mlp", "cnn"])
    if kind == "cnn":
        for i in range(hp.Int("conv_layers", 1, 3)):
            hp.Int(f"filters_{i}", 8, 32, step=8)
    else:
        hp.Int("units", 16, 128)
    if hp.Boolean("dropout"):
        hp.Float("rate", 0.1, 0.5)
    if hp.Choice("optimizer", ["adam", "sgd"]) == "sgd":
        with hp.conditional_scope("optimizer", ["sgd"]):
            hp.Float("momentum", 0.0, 0.9)
    hp.Float("learning_rate", 1e-4, 1e-2, sampling="log")
    hp.Fixed("activation", "relu")


def test_parameters_on_some_branches_are_found_with_the_value_that_reveals_them():
    space = discover(branching_build).space_dict()
    assert space["filters_0"]["when"] == {"kind": ["cnn"]}
    assert space["filters_1"]["when"] == {"conv_layers": [2, 3]}
    assert space["filters_2"]["when"] == {"conv_layers": [3]}
    assert space["conv_layers"]["when"] == {"kind": ["cnn"]}
    assert space["units"]["when"] == {"kind": ["mlp"]}
    assert space["rate"]["when"] == {"dropout": [True]}
    assert space["momentum"]["when"] == {"optimizer": ["sgd"]}     # from its conditional_scope
    assert "when" not in space["learning_rate"]
    assert "activation" not in space                               # Fixed is not searched
    assert space["filters_1"]["values"] == [8, 16, 24, 32]         # a stepped range is its grid


def test_the_discovered_space_is_a_valid_search_space_and_the_same_every_time():
    first, second = discover(branching_build), discover(branching_build)
    assert first.space_dict() == second.space_dict()
    assert first.fixed == {"activation": "relu"}
    space = SearchSpace.from_dict(first.space_dict())
    assert space.contains({"kind": "cnn", "conv_layers": 2, "filters_0": 8, "filters_1": 16, "dropout": False,
                           "optimizer": "adam", "learning_rate": 1e-3})


def test_hyperparameters_answer_with_the_config_and_defaults_for_what_it_lacks():
    hp = HyperParameters(values={"kind": "cnn", "conv_layers": 2, "filters_1": 24, "optimizer": "adam"})
    branching_build(hp)
    assert hp.get("filters_1") == 24 and hp.get("filters_0") == 8          # the config, else the default
    assert hp.asked[:4] == ["kind", "conv_layers", "filters_0", "filters_1"]
    inactive = HyperParameters(values={"optimizer": "adam"})
    inactive.Choice("optimizer", ["adam", "sgd"])
    with inactive.conditional_scope("optimizer", ["sgd"]):
        assert inactive.Float("momentum", 0.0, 0.9) is None                # Keras Tuner's rule
    # As Keras Tuner's: `values` lists what the build used, defaults and fixed ones included,
    # inactive ones not.
    fresh = HyperParameters()
    fresh.Int("units", 16, 64, step=16)
    fresh.Fixed("rate", 0.1)
    with fresh.conditional_scope("units", [32]):
        fresh.Choice("activation", ["relu", "tanh"])
    assert fresh.values == {"units": 16, "rate": 0.1}


def test_a_hypermodel_fits_a_model_as_keras_tuners_default_does(digits):
    import keras

    from hpo.keras_tuner import HyperModel
    x, y, _, _ = digits

    class Small(HyperModel):
        def build(self, hp):
            model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10)])
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            return model
    hypermodel = Small()
    history = hypermodel.fit(HyperParameters(), hypermodel.build(HyperParameters()), x[:64], y[:64], epochs=1,
                             verbose=0)
    assert len(history.history["loss"]) == 1


def test_numpy_numbers_given_to_hp_read_as_python_numbers():
    import numpy as np
    hp = HyperParameters()
    assert hp.Choice("units", list(np.arange(8, 33, 8))) == 8 and type(hp.declared["units"].values[1]) is int
    assert hp.Choice("rate", np.array([0.5, 0.25]), default=np.float64(0.25)) == 0.25
    assert hp.declared["rate"].values == (0.5, 0.25)
    assert hp.Int("filters", np.int64(8), np.int64(32), step=np.int64(8)) == 8
    assert type(hp.Fixed("seed", np.int64(3))) is int and hp.Float("lr", np.float64(0.5), np.float64(1.0)) == 0.5


def test_one_name_with_two_ranges_on_exclusive_branches_is_refused_naming_the_branch():
    # Keras Tuner allows it; hpo's space gives a name one range, and the trials of the second
    # branch would otherwise train with the first's default.
    from hpo.tuner.hyperparameters import DeclaredTwice

    def build(hp):
        kind = hp.Choice("model_type", ["a", "b"])
        with hp.conditional_scope("model_type", kind):
            hp.Int("units", 8, 16, step=8) if kind == "a" else hp.Int("units", 32, 64, step=32)
    with pytest.raises(DeclaredTwice, match=r"on the branch \{'model_type': 'b'\}: hyperparameter 'units' is "
                                            r"declared twice .* a name of its own \(e.g. 'units_b'\)"):
        discover(build)


def test_a_build_failing_on_its_defaults_is_the_users_error():
    def broken(hp):
        hp.Int("units", 1, 4)
        raise RuntimeError("no model here")
    with pytest.raises(RuntimeError, match="no model here"):
        discover(broken)


def test_a_failing_branch_is_skipped_and_noted():
    def partly(hp):
        if hp.Choice("act", ["relu", "bad"]) == "bad":
            raise ValueError("bad activation")
        hp.Int("units", 1, 4)
    found = discover(partly)
    assert set(found.space_dict()) == {"act", "units"} and "bad activation" in found.failures[0]


def test_unsupported_keras_tuner_options_are_named():
    hp = HyperParameters()
    with pytest.raises(ValueError, match="reverse_log"):
        hp.Float("x", 0.1, 1.0, sampling="reverse_log")
    with pytest.raises(NotImplementedError, match="merge"):
        _ = hp.merge


def test_a_parameter_discovery_missed_takes_its_default_and_the_log_says_so_once(caplog):
    import keras

    from hpo.tuner.trainer import HypermodelBuilder

    built = []

    def build(hp):
        units = hp.Int("units", 1, 4)
        if hp.Float("rate", 0.0, 1.0) > 0.5:        # gated by a float: exploration does not reach it
            built.append((units, hp.Int("hidden", 5, 9)))
        else:
            built.append((units, None))
        return keras.Sequential([keras.Input((1,))])

    builder = HypermodelBuilder(build, ["units", "rate"])
    # Read at the logger itself: an earlier in-process search in this worker may have set the
    # `hpo` logger not to propagate to the root, where caplog listens.
    tuner_log = logging.getLogger("hpo.tuner")
    tuner_log.addHandler(caplog.handler)
    try:
        with caplog.at_level("WARNING", logger="hpo.tuner"):
            builder({"units": 3, "rate": 0.9})
            builder({"units": 2, "rate": 0.8})
    finally:
        tuner_log.removeHandler(caplog.handler)
    assert built == [(3, 5), (2, 5)]
    # One record, seen once or twice (at the logger and, if it propagates, at the root).
    warnings = list({id(r): r.getMessage() for r in caplog.records if "'hidden'" in r.getMessage()}.values())
    assert len(warnings) == 1 and "takes its default 5" in warnings[0]


def test_a_stepped_range_is_its_grid_up_to_the_one_limit_and_refused_above_it():
    from hpo.tuner.keras_tuner_terms import STEP_GRID_LIMIT

    def at_limit(hp):
        hp.Float("rate", 0.0, 1.0, step=1 / (STEP_GRID_LIMIT - 1))

    def above_limit(hp):
        hp.Int("units", 0, STEP_GRID_LIMIT)   # unit steps are a plain int range: any count is fine
        hp.Int("width", 0, 2 * STEP_GRID_LIMIT, step=2)

    assert len(discover(at_limit).space_dict()["rate"]["values"]) == STEP_GRID_LIMIT
    with pytest.raises(ValueError, match=rf"'width': a stepped range of {STEP_GRID_LIMIT + 1} values is not "
                                         rf"supported \(at most {STEP_GRID_LIMIT}\); widen the step"):
        discover(above_limit).space_dict()
