"""tests/tuner: the Python tuners on real Keras models. TensorFlow is set up in every test as
tests/conftest.py `tf_logical_cpus` says: a tuner test that initialised TensorFlow first in an
xdist worker would otherwise leave the later device-placement tests of that worker one CPU."""

import pytest


@pytest.fixture(autouse=True)
def tensorflow_with_logical_cpus(tf_logical_cpus):
    return tf_logical_cpus


@pytest.fixture(scope="session")
def digits():
    """Digits as 8x8 images: 600 to train on, 300 to validate on (tiny, so searches take seconds)."""
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32").reshape(-1, 8, 8, 1)
    return x[:600], y[:600], x[600:900], y[600:900]


def conditional_cnn(hp):
    """The issue's CNN: the depth is a hyperparameter, the second layer's filters exist only at depth 2."""
    import keras
    inputs = keras.Input((8, 8, 1))
    x = inputs
    for i in range(hp.Int("conv_layers", 1, 2)):
        x = keras.layers.Conv2D(hp.Int(f"filters_{i}", 8, 64, step=4), 3, padding="same", activation="relu")(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.Adam(hp.Float("learning_rate", 1e-3, 1e-2, sampling="log")),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def small_mlp(hp):
    import keras
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(hp.Choice("units", [16, 32]), activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(hp.Float("lr", 1e-3, 1e-2, sampling="log")),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model
