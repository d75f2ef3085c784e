"""A regression tuned by `hpo search`: float targets, a linear output, ranked by validation MAE.

    python -m hpo search examples/regression.yaml

The experiment sets `training.loss: mse` and `training.metrics: [mae]`; every trial logs
`loss`, `mae`, `val_loss` and `val_mae` per epoch, and `search.objective: val_mae` is
minimised (the direction is inferred from the name). The loader returns float targets,
which hpo keeps as floats because the loss is not a classification loss.
"""

import keras
import numpy as np


def diabetes():
    """scikit-learn's bundled diabetes data (442 patients, 10 features). The targets, disease
    progression after a year, are standardised (mean 0, standard deviation 1), so `val_mae`
    reads in standard deviations."""
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes()
    x = (bunch.data - bunch.data.mean(0)) / bunch.data.std(0)
    y = (bunch.target - bunch.target.mean()) / bunch.target.std()
    return x.astype("float32"), y.astype("float32"), "sklearn load_diabetes, standardised"


def build(config, input_shape, num_classes):
    """An MLP that ends in one linear unit: the prediction itself (no activation)."""
    inputs = keras.Input(input_shape)
    x = inputs
    for _ in range(int(config["layers"])):
        x = keras.layers.Dense(int(config["units"]), activation="relu")(x)
        x = keras.layers.Dropout(float(config.get("dropout", 0.0)))(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x), name="regression_mlp")


if __name__ == "__main__":
    x, y, source = diabetes()
    print(f"{source}: {x.shape[0]} examples, {x.shape[1]} features, target sd {np.std(y):.2f}")
