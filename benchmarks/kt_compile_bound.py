"""What a new architecture costs before its first step, in hpo's compiled step and in Keras's `fit`.

    nice python benchmarks/kt_compile_bound.py              # 8 architectures of kt_script's space

Every config of `benchmarks/kt_script.py` is a new architecture (the filters are ranges), so
each pays its start-up once: tracing the step, optimising the graph, creating its kernels.
For each architecture (one process, the models built and trained in turn), this measures
that start-up as the first epoch's wall time less a steady epoch's, plus the same for the
validation pass: for hpo, `build_program`'s step of 31 batches (one compiled call, as the
trainer runs an epoch of 1,000 images at batch 32) and its evaluation; for Keras Tuner's
trainer, `model.fit(epochs=1)` and `model.evaluate` on the same arrays. It prints the median
per architecture and that median times 17, the architectures of a kt_script search.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _configs(n: int) -> list[dict]:
    return [{"conv_layers": 1 + i % 2, "filters_0": 8 + 4 * i, "filters_1": 60 - 4 * i,
             "dense_units": (32, 64, 128)[i % 3], "learning_rate": 1e-3} for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architectures", type=int, default=8)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import keras
    import numpy as np
    import tensorflow as tf

    from benchmarks.kt_script import build_model, digits
    from benchmarks.machine import cpu_description
    from hpo.training.program import build_program
    from hpo.tuner.hyperparameters import HyperParameters

    tf.get_logger().setLevel("ERROR")     # a new tf.function per architecture is the point here
    print(cpu_description())
    (x, y), (x_val, y_val), _ = digits()
    xt, yt, xv, yv = (tf.constant(a) for a in (x, y, x_val, y_val))
    calls = tf.constant(np.arange(31 * 32, dtype="int32").reshape(31, 32))
    ours, theirs = [], []
    for i, config in enumerate(_configs(args.architectures)):
        keras.utils.set_random_seed(i)
        model = build_model(HyperParameters(values=config))
        program = build_program("bound", model, {"optimizer": "adam", "learning_rate": 1e-3}, xt, yt, "graph",
                                loss="sparse_categorical_crossentropy", metrics=("accuracy",))
        epochs = []
        for _ in range(2):
            started = time.perf_counter()
            float(program.train_steps(calls)[0])
            float(program.evaluate(xv, yv))
            epochs.append(time.perf_counter() - started)
        ours.append(epochs[0] - epochs[1])
        keras.utils.set_random_seed(i)
        model = build_model(HyperParameters(values=config))
        epochs = []
        for _ in range(2):
            started = time.perf_counter()
            model.fit(x, y, batch_size=32, epochs=1, verbose=0)
            model.evaluate(x_val, y_val, verbose=0)
            epochs.append(time.perf_counter() - started)
        theirs.append(epochs[0] - epochs[1])
        print(f"architecture {i}: start-up hpo {ours[-1]:.2f} s, Keras fit {theirs[-1]:.2f} s", flush=True)
    for name, values in (("hpo compiled step", ours), ("Keras fit", theirs)):
        median = statistics.median(values)
        print(f"median start-up per architecture, {name}: {median:.2f} s; x 17 architectures: {17 * median:.1f} s")


if __name__ == "__main__":
    main()
