"""A trial's initial weights without building a live Keras model.

A reused program needs only the *values* a fresh seeded build would give. Building the
model for real creates a TensorFlow variable per weight (2-3 ms each on this CPU) and costs
18 ms for a 2x128 MLP. Built inside a `StatelessScope(initialize_variables=False)`, Keras
records each variable's shape and initializer instead of creating it; calling those
initializers gives the same values (the seeds are drawn from Python's `random` when the
initializers are constructed, in the same order as a real build) at 8 ms.

This leans on two private attributes of Keras variables (`_initializer`, `_shape`), so the
trainer checks the values against a real build once per architecture and only then uses
this path (`Trainer._stateless_init`); a Keras release that changes them falls back to
real builds.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np


def initial_values(builder: Callable, params: Mapping[str, Any], input_shape: tuple, num_classes: int) -> list | None:
    """The builder's variables (`model.variables` order) as freshly initialised tensors,
    under whatever seed the caller set; None when this Keras does not defer initialisation."""
    import keras
    from keras.src.backend.common import global_state

    key = "uninitialized_variables"
    before = list(global_state.get_global_attribute(key, []) or [])
    try:
        with keras.StatelessScope(initialize_variables=False):
            model = builder(params, input_shape, num_classes)
        values = []
        for variable in model.variables:
            initializer, shape = getattr(variable, "_initializer", None), getattr(variable, "_shape", None)
            if not callable(initializer) or shape is None:
                return None
            values.append(initializer(shape, dtype=variable.dtype))
        return values
    finally:
        # The deferred variables are registered globally for a later initialize_all_variables();
        # ours are never initialised, and keeping them would leak one model per trial.
        global_state.set_global_attribute(key, before)


def same_values(model_variables: Sequence, values: Sequence | None) -> bool:
    """Whether `values` are exactly a real build's variable values."""
    from keras import ops

    if values is None or len(values) != len(model_variables):
        return False
    return all(tuple(v.shape) == tuple(value.shape) and
               np.array_equal(ops.convert_to_numpy(v.value), ops.convert_to_numpy(value))
               for v, value in zip(model_variables, values))
