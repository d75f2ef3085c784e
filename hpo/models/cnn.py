"""A small convolutional network: `conv_layers` x (Conv2D, max-pool), then one Dense layer.

Filters double per conv layer, starting at `filters`; pooling stops once the map is 2x2
so the 8x8 digits and 28x28 MNIST both work.
"""

from __future__ import annotations

from typing import Any, Mapping

import keras

from hpo.models.layers import TunableDropout


def build_cnn(config: Mapping[str, Any], input_shape: tuple, num_classes: int) -> keras.Model:
    conv_layers = int(config.get("conv_layers", 2))
    filters = int(config.get("filters", 32))
    kernel_size = int(config.get("kernel_size", 3))
    dense_units = int(config.get("dense_units", 128))
    dropout = float(config.get("dropout", 0.0))
    activation = str(config.get("activation", "relu"))
    inputs = keras.Input(shape=input_shape)
    x = keras.layers.Reshape((*input_shape, 1))(inputs) if len(input_shape) == 2 else inputs
    size = min(input_shape[:2])
    for i in range(conv_layers):
        x = keras.layers.Conv2D(filters * 2 ** i, kernel_size, padding="same", activation=activation)(x)
        if size >= 4:
            x = keras.layers.MaxPooling2D(2)(x)
            size //= 2
    x = keras.layers.Flatten()(x)
    x = TunableDropout(dropout)(x)
    x = keras.layers.Dense(dense_units, activation=activation)(x)
    outputs = keras.layers.Dense(num_classes)(x)
    return keras.Model(inputs, outputs, name="cnn")


# Parameters held in variables: changing them does not change the traced graph.
build_cnn.tunable_params = ("dropout",)
