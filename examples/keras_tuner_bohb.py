"""Our BOHB deciding inside Keras Tuner's own loop, for a HyperModel with its own `fit` (here
it tunes the batch size), which `import hpo.keras_tuner as kt` refuses: that face trains the
compiled model itself. Keras Tuner trains and keeps the trials; `BOHBOracle` decides.

    python examples/keras_tuner_bohb.py [--max-epochs 9] [--directory DIR]
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_tuner as kt  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from hpo.keras_tuner.oracles import BOHBOracle, OracleTuner  # noqa: E402


class DigitsModel(kt.HyperModel):
    def build(self, hp):
        # Declared here, read in fit: the oracle's searcher is made from the parameters that
        # Keras Tuner knows when the first trial starts, which are the ones build declares.
        hp.Choice("batch_size", [16, 32])
        return build(hp)

    def fit(self, hp, model, *args, **kwargs):
        return model.fit(*args, batch_size=hp.get("batch_size"), **kwargs)


def build(hp):
    model = keras.Sequential([keras.Input((64,)),
                              keras.layers.Dense(hp.Int("units", 16, 64, step=16), activation="relu"),
                              keras.layers.Dropout(hp.Float("dropout", 0.0, 0.4)),
                              keras.layers.Dense(10)])
    optimizer = hp.Choice("optimizer", ["adam", "sgd"])
    learning_rate = hp.Float("learning_rate", 1e-3, 3e-2, sampling="log")
    if optimizer == "sgd":
        with hp.conditional_scope("optimizer", ["sgd"]):
            momentum = hp.Float("momentum", 0.0, 0.95)
        opt = keras.optimizers.SGD(learning_rate, momentum=momentum)
    else:
        opt = keras.optimizers.Adam(learning_rate)
    model.compile(opt, keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def main(max_epochs: int = 9, directory: str | None = None):
    keras.utils.set_random_seed(0)    # the searcher is seeded; this seeds the weights and dropout too
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    directory = directory or tempfile.mkdtemp(prefix="kt-bohb-")
    oracle = BOHBOracle(kt.Objective("val_accuracy", "max"), max_epochs=max_epochs, factor=3, seed=0)
    tuner = OracleTuner(DigitsModel(), oracle, directory=directory, project_name="digits", overwrite=True)
    tuner.search(x[:1400], y[:1400], validation_data=(x[1400:], y[1400:]), verbose=0)
    best = tuner.get_best_models(1)[0]
    loss, accuracy = best.evaluate(x[1400:], y[1400:], verbose=0)
    print(f"best hyperparameters: {tuner.get_best_hyperparameters(1)[0].values}")
    print(f"best model: validation accuracy {accuracy:.3f}")
    return tuner, accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-epochs", type=int, default=9)
    parser.add_argument("--directory")
    args = parser.parse_args()
    main(args.max_epochs, args.directory)
