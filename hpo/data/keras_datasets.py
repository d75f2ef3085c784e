"""The data sets of `keras.datasets`, from Keras's cache or a download with a short timeout.

An offline machine without the cached file gets a ConfigError (exit 2) saying which file to
download and where to put it, rather than a traceback from deep inside Keras.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
from pathlib import Path

import numpy as np

from hpo.errors import ConfigError

_GOOGLE = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
_FASHION = ("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
            "t10k-images-idx3-ubyte.gz")
# name -> (files under the Keras cache folder, where they come from, images?)
SETS: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "fashion_mnist": (tuple(f"fashion-mnist/{f}" for f in _FASHION), f"{_GOOGLE}<file>", True),
    "cifar10": (("cifar-10-batches-py-target",), "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", True),
    "cifar100": (("cifar-100-python-target",), "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", True),
    "boston_housing": (("boston_housing.npz",), f"{_GOOGLE}boston_housing.npz", False),
    "california_housing": (("california_housing.npz",), f"{_GOOGLE}california_housing.npz", False),
}

NETWORK_TIMEOUT_S = 5.0


def keras_cache() -> Path:
    """Where Keras keeps downloaded data sets: its home (`KERAS_HOME` as Keras read it at
    import, else ~/.keras) / datasets."""
    try:
        from keras.src.backend.config import keras_home
        home = keras_home()
    except ImportError:     # a Keras that moved its private accessor: the documented default
        home = os.environ.get("KERAS_HOME", str(Path.home() / ".keras"))
    return Path(home).expanduser() / "datasets"


def keras_loader(name: str):
    """The loader of one `keras.datasets` set: train and test joined (hpo splits them), images
    scaled to 0..1, labels flattened to one class index per example; the housing prices are
    standardised so `mae` reads in standard deviations."""
    files, origin, images = SETS[name]

    def load() -> tuple[np.ndarray, np.ndarray, str]:
        import keras

        module = getattr(keras.datasets, name)
        previous = socket.getdefaulttimeout()
        socket.setdefaulttimeout(NETWORK_TIMEOUT_S)
        try:
            with contextlib.redirect_stdout(io.StringIO()):   # keras prints a progress bar
                (x_tr, y_tr), (x_te, y_te) = module.load_data()
        except Exception as exc:  # noqa: BLE001 - no cache and no network, or a damaged file
            where = ", ".join(str(keras_cache() / f) for f in files)
            raise ConfigError(f"keras.datasets.{name} could not be read from the cache or downloaded "
                              f"({type(exc).__name__}: {str(exc)[:160]}); on an offline machine download "
                              f"{origin} elsewhere and put it at {where}", key="data.dataset") from None
        finally:
            socket.setdefaulttimeout(previous)
        x, y = np.concatenate([x_tr, x_te]), np.concatenate([y_tr, y_te])
        if images:
            x, y = x.astype("float32") / 255.0, y.reshape(len(y)).astype("int32")
        else:
            x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1.0)
            y = ((y - y.mean()) / y.std()).astype("float32")
        return x.astype("float32"), y, f"keras.datasets.{name} ({len(x)} examples)"
    load.__name__ = f"load_{name}"
    load.__doc__ = f"keras.datasets.{name}, train and test joined."
    return load
