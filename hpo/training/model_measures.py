"""Model measures: values hpo computes once per trial after training, which objectives and
constraints may name beside the metrics a trial logs.

    params       trainable parameters
    model_bytes  the size of the saved weights (every variable, as stored)
    latency_ms   median time of one forward pass on `training.latency_batch` examples, on
                 the trial's device, after warm-up

They depend on the architecture, not on the trained values, so the trainer measures a model
built from the trial's config. Only the names an objective or constraint uses are measured:
timing costs a few hundred forward passes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Iterable

import numpy as np

from hpo.metric_names import model_measures_in

WARMUP_CALLS = 5
MIN_REPEATS, MAX_REPEATS = 20, 500
TIMING_SECONDS = 0.25          # repeats stop once this much time was timed (after MIN_REPEATS)


def measure_model(model, names: Iterable[str], x: Any, batch: int = 1,
                  device: str | None = None) -> dict[str, float]:
    """The measures `names` asks for, of `model`; `x` holds example inputs (repeated when
    fewer than `batch`): an array, or a dict or tuple of arrays for a model with several inputs."""
    names = model_measures_in(names)
    out: dict[str, float] = {}
    if "params" in names:
        out["params"] = float(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    if "model_bytes" in names:
        out["model_bytes"] = float(sum(int(np.prod(w.shape)) * np.dtype(_dtype(w)).itemsize for w in model.weights))
    if "latency_ms" in names:
        out["latency_ms"] = latency_ms(model, x, batch, device)
    return out


def latency_ms(model, x: Any, batch: int = 1, device: str | None = None) -> float:
    """Median milliseconds of one traced forward pass on `batch` examples, waiting for the result."""
    import tensorflow as tf

    from hpo.data.nested import map_tree

    # Inputs of several arrays (a model with several inputs): each repeated to `batch` rows.
    rows = map_tree(lambda a: np.resize(np.asarray(a), (batch, *np.asarray(a).shape[1:])), x)
    with tf.device(device) if device else _nothing():
        inputs = tf.nest.map_structure(tf.constant, rows)
        forward = tf.function(lambda v: model(v, training=False))

        def call() -> None:
            tf.nest.flatten(forward(inputs))[0].numpy()

        for _ in range(WARMUP_CALLS):
            call()
        times: list[float] = []
        while len(times) < MAX_REPEATS and (len(times) < MIN_REPEATS or sum(times) < TIMING_SECONDS):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def _dtype(weight: Any) -> str:
    dtype = getattr(weight, "dtype", "float32")
    return getattr(dtype, "name", None) or str(dtype)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
