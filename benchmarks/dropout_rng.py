"""Dropout's random numbers: Keras's Philox against our counter-based hash, in XLA and graph mode.

    python benchmarks/dropout_rng.py

Times 64 draws of a [64, 128] block (one MLP layer's mask at batch 64) inside one compiled
call, 20 calls, and prints the median microseconds per draw and the Philox / hash ratio
for each mode.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorflow as tf  # noqa: E402

from hpo.models import counter_random  # noqa: E402

SHAPE = (64, 128)
DRAWS = 64


def philox(seed):
    total = tf.zeros(SHAPE)
    for i in tf.range(DRAWS):
        total += tf.random.stateless_uniform(SHAPE, tf.stack([seed, i]))
    return total


def counter_hash(seed):
    total = tf.zeros(SHAPE)
    for i in tf.range(DRAWS):
        total += counter_random.uniform(SHAPE, counter_random.seed_key(tf.stack([seed, i])))
    return total


def per_draw_us(function, jit: bool) -> float:
    compiled = tf.function(function, jit_compile=jit)
    compiled(tf.constant(0)).numpy()
    times = []
    for call in range(20):
        started = time.perf_counter()
        compiled(tf.constant(call)).numpy()
        times.append(time.perf_counter() - started)
    return statistics.median(times) / DRAWS * 1e6


def main() -> None:
    print(f"one draw = {SHAPE[0]}x{SHAPE[1]} uniform floats; medians of 20 calls of {DRAWS} draws")
    for mode, jit in (("xla", True), ("graph", False)):
        slow, fast = per_draw_us(philox, jit), per_draw_us(counter_hash, jit)
        print(f"{mode:5s}: philox {slow:6.1f} us, counter hash {fast:6.1f} us; philox / hash = {slow / fast:.2f}")


if __name__ == "__main__":
    main()
