"""A multilayer perceptron: `layers` hidden Dense layers of `units`, each followed by dropout."""

from __future__ import annotations

from typing import Any, Mapping

import keras

from hpo.models.layers import TunableDropout


def build_mlp(config: Mapping[str, Any], input_shape: tuple, num_classes: int) -> keras.Model:
    layers = int(config.get("layers", 1))
    units = int(config.get("units", 128))
    dropout = float(config.get("dropout", 0.0))
    activation = str(config.get("activation", "relu"))
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inputs) if len(input_shape) > 1 else inputs
    for _ in range(layers):
        x = keras.layers.Dense(units, activation=activation)(x)
        x = TunableDropout(dropout)(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="mlp")


# Parameters held in variables: changing them does not change the traced graph.
build_mlp.tunable_params = ("dropout",)
