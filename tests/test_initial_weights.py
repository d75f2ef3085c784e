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
    assert trainer._stateless_init and all(trainer._stateless_init.values())
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
    assert list(trainer._stateless_init.values()) == [False]
    for a, b in zip(trainer.fresh_weights(params, seed=4), real_values(trainer, params, seed=4)):
        np.testing.assert_array_equal(np.asarray(a), b)
