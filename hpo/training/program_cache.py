"""A worker's compiled programs, least recently used first out, bounded in count and bytes.

A program (`hpo.training.program.TrainingProgram`) holds an architecture's Keras model, its
optimizer and slots, and the traced step and evaluation. Keeping them lets promotions and
trials that share an architecture skip the build and the trace; bounding them keeps a long
search's memory flat when most trials bring a new architecture. A program leaves the cache
when the cache holds more than `capacity` programs or when their variables (model and
optimizer) take more than `budget_bytes`; the trainer forgets what else it kept for the
architecture (`on_evict`). An evicted architecture that comes back is built and traced
again, and trains bit for bit as it did the first time (tests/training/test_program_cache.py).

Eviction frees the traced graphs only if nothing global holds them: TensorFlow's gradient
registry kept every trace of a Keras optimizer's update alive until
`hpo.training.optimizers` stopped Keras registering one (benchmarks/worker_memory.py
measures the worker's memory over 5,000 trials).

The cache counts hits, misses and evictions; each miss is logged at debug with the hit rate
so far. A miss costs a model build and a trace, 0.5-1 s for a small MLP on a 2-core CPU
(benchmarks/worker_memory.py reports the median).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any, Callable

log = logging.getLogger("hpo.train")

# A default bracket's first rung (27 configs at 1/27/3) fits, so its promotions find their program.
DEFAULT_CAPACITY = 32
# The programs' variables together; a few models of tens of millions of parameters fill it.
DEFAULT_BUDGET_BYTES = 1 << 30


def program_bytes(program: Any) -> int:
    """The bytes of a program's variables: its model's and its optimizer's (slots included)."""
    variables = list(program.model.variables) + list(program.optimizer.optimizer.variables)
    return sum(variable_bytes(v) for v in variables)


def variable_bytes(variable: Any) -> int:
    elements = 1
    for dimension in variable.shape:
        elements *= int(dimension or 0)
    size = getattr(getattr(variable, "dtype", None), "size", None)
    if size is None:
        import numpy as np
        size = np.dtype(str(variable.dtype)).itemsize
    return elements * size


class ProgramCache:
    """Least-recently-used programs by (signature, device, mode).

    `capacity`: the most programs kept; `budget_bytes`: the most bytes their variables take
    together (None: no byte bound); the most recent program stays even when it alone is over
    the budget. `on_evict(key, program)`: called for each program that leaves by eviction
    (not by `discard`). `measure(program)`: a program's bytes (default `program_bytes`)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, budget_bytes: int | None = DEFAULT_BUDGET_BYTES,
                 on_evict: Callable[[tuple, Any], None] | None = None,
                 measure: Callable[[Any], int] = program_bytes):
        if capacity < 1:
            raise ValueError(f"a program cache holds at least one program, got capacity {capacity}")
        self.capacity = capacity
        self.budget_bytes = budget_bytes
        self.on_evict = on_evict
        self.measure = measure
        self._programs: OrderedDict[tuple, Any] = OrderedDict()
        self._bytes: dict[tuple, int] = {}
        self.hits = self.misses = self.evictions = 0

    def get(self, key: tuple) -> Any | None:
        """The program for `key`, now the most recently used, or None (a miss, counted)."""
        program = self._programs.get(key)
        if program is None:
            self.misses += 1
            log.debug("program cache miss (%d programs, hit rate %.2f over %d lookups)",
                      len(self._programs), self.hit_rate, self.hits + self.misses)
            return None
        self.hits += 1
        self._programs.move_to_end(key)
        return program

    def put(self, key: tuple, program: Any) -> None:
        """Keep `program` as the most recently used, evicting the least recently used ones
        while the cache is over its capacity or its byte budget."""
        self._bytes[key] = self.measure(program)
        self._programs[key] = program
        self._programs.move_to_end(key)
        while len(self._programs) > 1 and (len(self._programs) > self.capacity or self._over_budget()):
            old_key, old = self._programs.popitem(last=False)
            released = self._bytes.pop(old_key)
            self.evictions += 1
            log.debug("program cache evicts a program of %.1f MB (%d kept, %d evicted so far)",
                      released / 2**20, len(self._programs), self.evictions)
            if self.on_evict is not None:
                self.on_evict(old_key, old)

    def mark_used(self, key: tuple) -> None:
        """`key`'s program, found by a look over `items()` rather than `get`, is now the most
        recently used (no hit or miss is counted)."""
        self._programs.move_to_end(key)

    def items(self) -> list[tuple[tuple, Any]]:
        """(key, program) pairs, least recently used first."""
        return list(self._programs.items())

    def values(self) -> list[Any]:
        return list(self._programs.values())

    def __iter__(self):
        return iter(list(self._programs))

    def discard(self, key: tuple) -> None:
        self._programs.pop(key, None)
        self._bytes.pop(key, None)

    def keys(self) -> list[tuple]:
        """The cached keys, least recently used first."""
        return list(self._programs)

    def __len__(self) -> int:
        return len(self._programs)

    def __contains__(self, key: tuple) -> bool:
        return key in self._programs

    @property
    def bytes(self) -> int:
        """The bytes of the cached programs' variables."""
        return sum(self._bytes.values())

    @property
    def hit_rate(self) -> float:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0

    @property
    def traces(self) -> int:
        return sum(p.traces[0] for p in self._programs.values())

    def _over_budget(self) -> bool:
        return self.budget_bytes is not None and self.bytes > self.budget_bytes
