"""A program's variables set or read in one graph call, once that repays its trace.

A reused program starts each trial by assigning every variable it holds: the weights, the
dropout rates and seed-generator states, the optimizer's step count and slots (to zero)
and its hyperparameters; and it ends it by copying them all to the host for the
checkpoint. Eagerly that is one or two dispatched operations per variable, 0.1-0.4 ms each
on the 2-core AMD EPYC: ~10 ms to start a 2x128 MLP with Adam and ~6 ms to read its 23
variables, against a two-epoch trial of ~100 ms on 4,000 images. Traced (graph mode:
nothing here is worth an XLA compile), each is one call of ~1 ms; but the trace costs
60-90 ms, the price of 7-15 eager calls. An architecture a search tries once or twice
would lose, so each object runs eagerly until the time it has spent so equals what a
trace costs (`TRACE_SECONDS`), then traces: never much more than twice the cheaper
choice, whichever it turns out to be.
"""

from __future__ import annotations

import time
from typing import Sequence

# What tracing one of these calls costs on the 2-core AMD EPYC (60-90 ms measured).
TRACE_SECONDS = 0.08


class EagerUntilRepaid:
    """Seconds spent on the eager path, and whether they have paid for a trace yet."""

    def __init__(self, trace_seconds: float | None = None):
        self.trace_seconds = TRACE_SECONDS if trace_seconds is None else trace_seconds
        self.spent = 0.0

    def add(self, started: float) -> bool:
        """Count the eager call begun at `started` (a `time.perf_counter()`): True once the
        eager calls together have cost a trace."""
        self.spent += time.perf_counter() - started
        return self.spent >= self.trace_seconds


class BulkAssign:
    """`assign(values)` sets `targets[i]` to `values[i]` and every variable of `zeroed` to
    zero; in one traced call once the eager calls have cost a trace. A value of the wrong
    shape raises ValueError before anything is assigned."""

    def __init__(self, targets: Sequence, zeroed: Sequence = (), trace_seconds: float | None = None):
        self.targets = list(targets)
        # A variable both assigned and zeroed would depend on the order the graph runs them in.
        self.zeroed = [v for v in zeroed if not any(v is t for t in self.targets)]
        self._shapes = [tuple(t.shape) for t in self.targets]
        self._eager = EagerUntilRepaid(trace_seconds)
        self._call = None

    def _assign(self, *values) -> None:
        import tensorflow as tf

        for target, value in zip(self.targets, values):
            target.assign(value)
        for variable in self.zeroed:
            variable.assign(tf.zeros(variable.shape, variable.dtype))

    def _trace(self):
        import tensorflow as tf

        # Called as a concrete function: 0.35 against 0.8 ms through tf.function's binding of
        # the same ten tensors to an input signature. It checks no shapes, so __call__ does.
        return tf.function(tf.autograph.experimental.do_not_convert(self._assign)).get_concrete_function(
            *[tf.TensorSpec(shape, t.dtype) for shape, t in zip(self._shapes, self.targets)])

    def __call__(self, values: Sequence) -> None:
        if len(values) != len(self.targets):
            raise ValueError(f"{len(values)} values for {len(self.targets)} variables")
        for i, (value, shape) in enumerate(zip(values, self._shapes)):
            if tuple(getattr(value, "shape", ())) != shape:
                raise ValueError(f"value {i} has shape {tuple(getattr(value, 'shape', ()))}, "
                                 f"its variable {shape}")
        if self._call is not None:
            self._call(*values)
            return
        started = time.perf_counter()
        self._assign(*values)
        if self._eager.add(started):
            self._call = self._trace()

    @property
    def traced(self) -> bool:
        return self._call is not None


class BulkRead:
    """`read()` -> every variable's value as a NumPy array; in one traced call once the eager
    reads have cost a trace (0.4-1.2 against 4.5-6.9 ms for the 23 variables of a 2x128 MLP
    and its Adam state)."""

    def __init__(self, variables: Sequence, trace_seconds: float | None = None):
        self.variables = list(variables)
        self._eager = EagerUntilRepaid(trace_seconds)
        self._call = None

    def read(self) -> list:
        if self._call is not None:
            return [value.numpy() for value in self._call()]
        started = time.perf_counter()
        values = [v.value.numpy() for v in self.variables]
        if self._eager.add(started):
            import tensorflow as tf
            self._call = tf.function(lambda: [v.value for v in self.variables]).get_concrete_function()
        return values

    @property
    def traced(self) -> bool:
        return self._call is not None
