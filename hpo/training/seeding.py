"""Per-trial seeding that leaves TensorFlow's kernel cache alone.

`keras.utils.set_random_seed` also calls `tf.random.set_seed`, and setting TensorFlow's
global seed clears the eager context's kernel cache: the next call of every compiled step
re-instantiates its kernels. Measured on a reused MLP program, that made a trial's first
call 100 ms instead of 28 ms. Keras's initializers and our dropout draw their seeds from
Python's `random` through Keras's global SeedGenerator, so seeding Python, NumPy and that
generator gives identical weights, without the TensorFlow reset.
"""

from __future__ import annotations

import random

import numpy as np


def seed_trial(seed: int) -> None:
    try:
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        from keras.src.utils import rng_utils
    except ImportError:          # Keras moved its internals: fall back to the public, slower call
        import keras
        keras.utils.set_random_seed(seed)
        return
    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    random.seed(seed)
    np.random.seed(seed)
