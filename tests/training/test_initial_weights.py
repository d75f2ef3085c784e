"""A trial's initial weights without a live model: exactly a real seeded build's, or a real build."""

import keras
import numpy as np
import pytest

from hpo.config import TrainingConfig
from hpo.models import get_builder
from hpo.models.layers import TunableDropout


def make_trainer(digits, builder):
    from hpo.training.trainer import Trainer
    return Trainer(digits, builder, TrainingConfig(compile="graph"), {}, "/device:CPU:0")


def real_values(trainer, params, seed):
    return [np.asarray(v.value) for v in trainer.build_model(params, seed).variables]


def pending_variables():
    from keras.src.backend.common import global_state
    return len(global_state.get_global_attribute("uninitialized_variables", []) or [])


@pytest.mark.parametrize("builder, params", [
    ("mlp", {"layers": 2, "units": 32, "dropout": 0.2}),
    ("cnn", {"conv_layers": 2, "filters": 8, "kernel_size": 3, "dense_units": 16, "dropout": 0.1}),
])
def test_stateless_values_equal_a_real_seeded_build(digits, builder, params):
    trainer = make_trainer(digits, get_builder(builder))
    params = trainer.resolve(params)
    trainer.fresh_weights(params, seed=1)               # the first call vouches for the stateless path
    assert trainer.weights.checked and all(trainer.weights.checked.values())
    before = pending_variables()
    for seed in (2, 3, 7):
        fresh = [np.asarray(v) for v in trainer.fresh_weights({**params, "dropout": 0.05 * seed}, seed)]
        real = real_values(trainer, {**params, "dropout": 0.05 * seed}, seed)
        assert len(fresh) == len(real)
        for a, b in zip(fresh, real):
            np.testing.assert_array_equal(a, b)
    # Different seeds really give different weights, and nothing is left registered globally.
    assert not np.array_equal(np.asarray(trainer.fresh_weights(params, 2)[0]),
                              np.asarray(trainer.fresh_weights(params, 3)[0]))
    assert pending_variables() == before


class PresetBias(keras.layers.Layer):
    """Creates its variable from a concrete array: Keras refuses that inside a stateless scope."""

    def build(self, input_shape):
        self.offset = keras.Variable(np.full(input_shape[-1:], 0.5, "float32"))

    def call(self, x):
        return x + self.offset


def build_with_preset_bias(config, input_shape, num_classes):
    inputs = keras.Input(input_shape)
    x = PresetBias()(keras.layers.Dense(8)(inputs))
    x = TunableDropout(float(config.get("dropout", 0.0)))(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(x))


build_with_preset_bias.tunable_params = ("dropout",)


def test_a_builder_the_stateless_path_cannot_handle_falls_back_to_real_builds(digits):
    trainer = make_trainer(digits, build_with_preset_bias)
    params = trainer.resolve({"dropout": 0.1})
    trainer.fresh_weights(params, seed=1)
    assert list(trainer.weights.checked.values()) == [False]
    for a, b in zip(trainer.fresh_weights(params, seed=4), real_values(trainer, params, seed=4)):
        np.testing.assert_array_equal(np.asarray(a), b)


class CountingBuilder:
    """Wraps a builder, counting how often it runs (a recipe replays without it)."""

    def __init__(self, builder):
        self.builder, self.calls = builder, 0
        self.tunable_params = getattr(builder, "tunable_params", ())
        self.__module__, self.__qualname__ = builder.__module__, builder.__qualname__

    def __call__(self, *args):
        self.calls += 1
        return self.builder(*args)


@pytest.mark.parametrize("builder, params", [
    ("mlp", {"layers": 2, "units": 32}),
    ("cnn", {"conv_layers": 2, "filters": 8, "kernel_size": 3, "dense_units": 16}),
])
def test_after_two_trials_initial_weights_are_replayed_without_the_builder(digits, builder, params, monkeypatch):
    from hpo.training import bulk_variables
    from hpo.training.initial_weights import InitRecipe

    monkeypatch.setattr(bulk_variables, "TRACE_SECONDS", 0.0)   # traced from the replay's second call
    counting = CountingBuilder(get_builder(builder))
    trainer = make_trainer(digits, counting)
    params = trainer.resolve(params)
    for seed in (1, 2):                                  # a real and a stateless build, then one stateless
        trainer.fresh_weights({**params, "dropout": 0.1 * seed}, seed)
    assert all(isinstance(r, InitRecipe) for r in trainer.weights.recipes.values())
    calls = counting.calls
    replayed = {seed: trainer.fresh_weights({**params, "dropout": 0.04 * seed}, seed) for seed in (3, 4, 9)}
    assert counting.calls == calls
    # After the first replay its random initializers run as one traced call, checked exact.
    assert all(r.seeded.traced for r in trainer.weights.recipes.values())
    for seed, values in replayed.items():
        real = real_values(trainer, {**params, "dropout": 0.04 * seed}, seed)
        assert len(values) == len(real)
        for a, b in zip(values, real):
            np.testing.assert_array_equal(np.asarray(a), b)


def build_with_own_draws(config, input_shape, num_classes):
    """Uses Python's random for its own purposes: the seed draws cannot be told apart."""
    import random
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(8 + int(random.random() < 0))(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(TunableDropout(float(config["dropout"]))(x)))


def build_with_derived_constant(config, input_shape, num_classes):
    """Holds 1 - dropout, which is no parameter's value: a recipe cannot say where it comes from."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(8)(inputs)
    x = keras.layers.Dense(8, bias_initializer=keras.initializers.Constant(1 - float(config["dropout"])))(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(TunableDropout(float(config["dropout"]))(x)))


def build_with_fixed_seed(config, input_shape, num_classes):
    """An explicitly seeded kernel is the same in every trial; the rest follows the trial's seed."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(seed=42))(inputs)
    return keras.Model(inputs, keras.layers.Dense(num_classes)(TunableDropout(float(config["dropout"]))(x)))


for _builder in (build_with_own_draws, build_with_derived_constant, build_with_fixed_seed):
    _builder.tunable_params = ("dropout",)


@pytest.mark.parametrize("builder, replayed", [
    (build_with_own_draws, False), (build_with_derived_constant, False), (build_with_fixed_seed, True)])
def test_builders_a_recipe_cannot_explain_keep_running_and_all_give_exact_weights(digits, builder, replayed):
    from hpo.training.initial_weights import InitRecipe

    trainer = make_trainer(digits, builder)
    params = trainer.resolve({})
    for seed in (1, 2, 3, 5):
        trial = {**params, "dropout": 0.1 * seed}
        values = trainer.fresh_weights(trial, seed)
        for a, b in zip(values, real_values(trainer, trial, seed), strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
    assert [isinstance(r, InitRecipe) for r in trainer.weights.recipes.values()] == [replayed]


def test_a_recipe_from_trials_of_one_dropout_holds_for_that_dropout_only(digits):
    """Two trials with the same dropout cannot show whether the rate is a constant: their
    recipe replays that dropout only (a search that never tunes it replays every trial); a
    trial with another rate gets exact weights and, with the earlier build, a recipe for any rate."""
    from hpo.training.initial_weights import InitRecipe

    counting = CountingBuilder(get_builder("mlp"))
    trainer = make_trainer(digits, counting)
    params = trainer.resolve({"layers": 1, "units": 16, "dropout": 0.2})
    trainer.fresh_weights(params, 1)
    trainer.fresh_weights(params, 2)
    recipe = next(iter(trainer.weights.recipes.values()))
    assert isinstance(recipe, InitRecipe) and recipe.pinned == (("dropout", 0.2),)
    calls = counting.calls
    for a, b in zip(trainer.fresh_weights(params, 5), real_values(trainer, params, 5), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
    assert counting.calls == calls + 1          # the real build above; the replay ran no builder
    for dropout, seed in ((0.3, 3), (0.45, 4)):
        trial = {**params, "dropout": dropout}
        for a, b in zip(trainer.fresh_weights(trial, seed), real_values(trainer, trial, seed), strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
        recipe = next(iter(trainer.weights.recipes.values()))
        assert isinstance(recipe, InitRecipe) and recipe.pinned == ()


def test_a_trial_without_a_parameter_the_recipe_fills_gets_the_builders_default(digits):
    from hpo.training.initial_weights import InitRecipe

    trainer = make_trainer(digits, get_builder("mlp"))
    params = trainer.resolve({"layers": 1, "units": 16})
    for seed in (1, 2):
        trainer.fresh_weights({**params, "dropout": 0.1 * seed}, seed)
    assert isinstance(next(iter(trainer.weights.recipes.values())), InitRecipe)
    for a, b in zip(trainer.fresh_weights(params, 5), real_values(trainer, params, 5), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)


def test_a_traced_replay_that_differs_from_the_eager_one_is_not_used(digits, monkeypatch):
    """The traced initializers are kept only if they give the eager replay's values bit for bit."""
    from hpo.training import bulk_variables, initial_weights

    monkeypatch.setattr(bulk_variables, "TRACE_SECONDS", 0.0)
    traced = initial_weights._SeededValues._draw
    monkeypatch.setattr(initial_weights._SeededValues, "_draw",
                        lambda self, draws: [v + 1e-7 for v in traced(self, draws)])
    trainer = make_trainer(digits, get_builder("mlp"))
    params = trainer.resolve({"layers": 1, "units": 16})
    for seed in (1, 2):
        trainer.fresh_weights({**params, "dropout": 0.1 * seed}, seed)
    recipe = next(iter(trainer.weights.recipes.values()))
    assert isinstance(recipe, initial_weights.InitRecipe)
    for seed in (6, 7, 8):
        for a, b in zip(trainer.fresh_weights({**params, "dropout": 0.3}, seed),
                        real_values(trainer, {**params, "dropout": 0.3}, seed), strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
    assert recipe.seeded._settled and not recipe.seeded.traced


def test_an_architecture_tried_once_or_twice_does_not_pay_for_a_trace(digits):
    """Tracing costs what many eager replays do: a recipe stays eager until they have cost that."""
    trainer = make_trainer(digits, get_builder("mlp"))
    params = trainer.resolve({"layers": 1, "units": 16})
    for seed in (1, 2, 3):
        trainer.fresh_weights({**params, "dropout": 0.1 * seed}, seed)
    assert not next(iter(trainer.weights.recipes.values())).seeded.traced


def test_initial_weights_follow_the_trial_seed_while_another_thread_draws(digits):
    from hpo.config import TrainingConfig
    from hpo.models import get_builder
    from hpo.training.trainer import Trainer

    params = {"layers": 2, "units": 16, "dropout": 0.1, "learning_rate": 1e-3, "batch_size": 32}

    def weights():
        trainer = Trainer(digits, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0")
        # Three seeds: a real build, a stateless one, then a learnt recipe's replay.
        return [[np.asarray(w) for w in trainer.fresh_weights(params, seed)] for seed in (3, 4, 5)]

    quiet = weights()
    from tests.unit.test_seeding import in_thread
    noisy = in_thread(weights)
    for a, b in zip(quiet, noisy):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
