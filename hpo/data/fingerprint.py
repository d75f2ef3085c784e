"""A digest of arrays: how a loader split its examples (`Dataset.fingerprint`, kept by a study
so that `hpo best --export` scores on the split the search held out), and the key a tuner's
search data is registered under."""

from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np


def arrays_digest(arrays: Iterable[np.ndarray], algorithm: str = "sha256") -> str:
    """A hex digest of arrays, their shapes, dtypes and bytes, in order: the same arrays give
    the same digest on every call and machine. (A tuner's keys, stored in its studies'
    experiments, were made with sha1, which it keeps passing.)"""
    digest = hashlib.new(algorithm)
    for array in arrays:
        digest.update(str((array.shape, array.dtype.str)).encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()
