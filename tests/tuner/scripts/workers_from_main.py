"""A Keras Tuner script whose build_model lives in __main__, searched by two worker processes."""

import multiprocessing
import os
import sys
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import keras  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import hpo.keras_tuner as kt  # noqa: E402


def build_model(hp):
    if multiprocessing.parent_process() is not None:       # in a worker: did it fork from the preloaded server?
        with open(os.environ["PRELOAD_RECORD"], "a") as record:
            record.write(f"{'hpo.executors.worker_preload' in sys.modules}\n")
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Choice("units", [16, 32]), activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(keras.optimizers.Adam(hp.Float("lr", 1e-3, 1e-2, sampling="log")),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


if __name__ == "__main__":
    os.environ["PRELOAD_RECORD"] = os.path.join(sys.argv[1], "preload.txt")
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    tuner = kt.ASHA(build_model, objective="val_accuracy", max_epochs=3, seed=0, directory=sys.argv[1],
                    project_name="par", workers=2)
    started = time.time()
    tuner.search(x[:600], y[:600], validation_data=(x[600:900], y[600:900]), batch_size=32, verbose=0)
    trials = tuner.oracle.trials
    print("trials", len(trials), sorted({t.status for t in trials.values()}), "wall", round(time.time() - started, 1))
