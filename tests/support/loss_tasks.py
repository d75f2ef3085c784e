"""Small loaders and builders for the loss, metric and objective tests: a regression with float
targets and a binary classification with 0/1 labels, each a few hundred examples."""

import keras
import numpy as np


def regression(samples: int = 400, features: int = 8, seed: int = 0):
    """y = a fixed linear function of x plus a little noise: float targets."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype("float32")
    w = np.linspace(-1.0, 1.0, features).astype("float32")
    y = x @ w + 0.1 * rng.normal(size=samples).astype("float32") + 0.5
    return x, y.astype("float32"), f"linear regression (seed {seed})"


def binary(samples: int = 400, features: int = 8, seed: int = 0):
    """0/1 labels: which side of a fixed hyperplane each point lies on."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, features)).astype("float32")
    y = (x @ np.linspace(-1.0, 1.0, features) > 0).astype("int64")
    return x, y, f"binary hyperplane (seed {seed})"


def linear_output_mlp(config, input_shape, num_classes):
    """An MLP with one linear output unit: a regression model."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(int(config.get("units", 16)), activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def sigmoid_mlp(config, input_shape, num_classes):
    """An MLP that ends in a sigmoid: its outputs are probabilities."""
    inputs = keras.Input(input_shape)
    x = keras.layers.Dense(int(config.get("units", 16)), activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(x))


def softmax_mlp(config, input_shape, num_classes):
    """An MLP whose last layer is softmax, for `from_logits` detection."""
    return keras.Sequential([keras.Input(input_shape), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dense(num_classes), keras.layers.Softmax()])


def half_absolute_error(y_true, y_pred):
    """A custom metric named by reference."""
    return 0.5 * keras.ops.mean(keras.ops.abs(keras.ops.squeeze(y_pred, -1) - y_true), axis=-1)


class HalfSquaredError(keras.losses.Loss):
    """A custom loss named by reference to its class."""

    def call(self, y_true, y_pred):
        return 0.5 * keras.ops.mean(keras.ops.square(keras.ops.squeeze(y_pred, -1) - y_true), axis=-1)


class LargestError(keras.metrics.Metric):
    """A custom stateful metric named by reference to its class."""

    def __init__(self, name="largest_error", **kwargs):
        super().__init__(name=name, **kwargs)
        self.largest = self.add_variable(shape=(), initializer="zeros", name="largest")

    def update_state(self, y_true, y_pred, sample_weight=None):
        error = keras.ops.max(keras.ops.abs(keras.ops.squeeze(y_pred, -1) - keras.ops.cast(y_true, y_pred.dtype)))
        self.largest.assign(keras.ops.maximum(self.largest, error))

    def result(self):
        return self.largest
