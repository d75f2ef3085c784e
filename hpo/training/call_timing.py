"""Timing compiled calls against each other: which compile mode, which fused group size.

Machines drift: one compiled call can take twice as long within a minute. Timed one
candidate after another, a slow spell lands on every repeat of one candidate and makes it
lose. So the steady calls are timed in rounds that take each candidate in turn, and each
candidate keeps the median of its rounds: a slow spell then costs each candidate one sample.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Hashable, Mapping, TypeVar

Key = TypeVar("Key", bound=Hashable)


def first_call_seconds(call: Callable[[], Any], clock: Callable[[], float] = time.perf_counter) -> float:
    """One call's seconds: for a compiled function's first call, its trace and compile too."""
    started = clock()
    call()
    return clock() - started


def steady_seconds(calls: Mapping[Key, Callable[[], Any]], repeats: int = 3,
                   clock: Callable[[], float] = time.perf_counter) -> dict[Key, float]:
    """The median seconds of each of `calls` (already warmed up) over `repeats` rounds, each
    round calling every candidate once, in turn."""
    samples: dict[Key, list[float]] = {key: [] for key in calls}
    for _ in range(repeats):
        for key, call in calls.items():
            samples[key].append(first_call_seconds(call, clock))
    return {key: statistics.median(times) for key, times in samples.items()}
