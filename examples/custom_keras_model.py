"""A custom functional Keras model tuned by `hpo search`: the builder is your own function.

    python -m hpo search examples/custom_keras_model.yaml

The experiment names `model.builder: examples.custom_keras_model:build`. A builder takes
the trial's config (space values over `model.params` over training defaults), the input
shape and the number of classes, and returns an uncompiled model that outputs logits: hpo
owns the optimizer, the loss and the compiled training step.
"""

import keras


def build(config, input_shape, num_classes):
    inputs = keras.Input(input_shape)
    x = keras.layers.Flatten()(inputs)
    # Two branches of different depth, joined: something `mlp` and `cnn` cannot express.
    wide = keras.layers.Dense(int(config["wide_units"]), activation=config.get("activation", "relu"))(x)
    deep = x
    for _ in range(int(config["deep_layers"])):
        deep = keras.layers.Dense(int(config["deep_units"]), activation=config.get("activation", "relu"))(deep)
    joined = keras.layers.Concatenate()([wide, deep])
    joined = keras.layers.Dropout(float(config.get("dropout", 0.0)))(joined)
    outputs = keras.layers.Dense(num_classes)(joined)
    return keras.Model(inputs, outputs, name="wide_and_deep")
