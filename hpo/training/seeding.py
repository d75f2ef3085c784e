"""Per-trial seeding that leaves TensorFlow's kernel cache alone.

`keras.utils.set_random_seed` also calls `tf.random.set_seed`, and setting TensorFlow's
global seed clears the eager context's kernel cache: the next call of every compiled step
re-instantiates its kernels. Measured on a reused MLP program, that made a trial's first
call 100 ms instead of 28 ms. Keras's initializers and our dropout draw their seeds from
Python's `random` through Keras's global SeedGenerator, so seeding Python, NumPy and that
generator gives identical weights, without the TensorFlow reset.

Python's `random` is one generator per process, so a trial's draws are its seed's only if no
other thread draws between `seed_trial` and the build. A Dask worker trains in a task thread
while its event loop draws for heartbeat jitter and comm back-off; a fused search on dask
gave trial 0 other initial weights (and another result) in 2 runs of 5.
`use_thread_private_python_random` gives the calling thread a generator of its own.
"""

from __future__ import annotations

import inspect
import random
import threading

import numpy as np

_THREAD = threading.local()
_INSTALL_LOCK = threading.Lock()
_installed = False


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


def use_thread_private_python_random() -> None:
    """From now on, the `random` module's functions called from this thread use a generator
    of this thread's own; other threads keep the process's shared one.

    Keras draws its initializer seeds through the module's functions (`random.randint`), so
    the dispatch has to sit there: each module function bound to the shared generator is
    replaced, once per process, by one that picks the calling thread's generator if it has
    one."""
    global _installed
    with _INSTALL_LOCK:
        if not _installed:
            shared = random._inst        # the generator behind the module's functions
            for name, function in inspect.getmembers(random, inspect.ismethod):
                if function.__self__ is shared:
                    setattr(random, name, _per_thread(name, function))
            _installed = True
    _THREAD.generator = random.Random()


def _per_thread(name: str, shared_function):
    def call(*args, **kwargs):
        generator = getattr(_THREAD, "generator", None)
        return shared_function(*args, **kwargs) if generator is None else getattr(generator, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = shared_function.__doc__
    return call
