"""Running a small fused group in a bigger compiled program, with its spare trial slots idle.

A fused program is compiled for one group size K. Hyperband hands out groups of many sizes
(a rung's leftovers, promotions), and each new size costs a trace and, under XLA, a compile.
A group of k < K trials can instead run in a cached K-slot program: the spare slots train a
copy of the first trial and are thrown away, which costs (K - k) trials' share of every
step. Trials do not interact inside a fused program (each slot's loss and gradient are its
own), so the k real trials train as in a program of their own size, within float rounding.
In a Hyperband search of one architecture, groups of 6 and 4 then run in an 8-trial program
instead of each paying a compile.

Which is cheaper is decided from what each program measured of itself: its first call,
with the trace and compile, against its later calls.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Iterable

RECENT_CALLS = 16           # steady calls kept per program for its per-step time


@dataclass
class CallTimes:
    """A fused program's measured calls: the first (trace and compile included) and recent
    steady ones, as seconds per training step."""
    first_call: float | None = None
    first_steps: int = 0
    step_seconds: list[float] = field(default_factory=list)

    def record(self, steps: int, seconds: float) -> None:
        if self.first_call is None:
            self.first_call, self.first_steps = seconds, steps
            return
        self.step_seconds = (self.step_seconds + [seconds / steps])[-RECENT_CALLS:]

    @property
    def step(self) -> float | None:
        """Seconds per fused training step, once a steady call was timed."""
        return statistics.median(self.step_seconds) if self.step_seconds else None

    @property
    def compile_seconds(self) -> float | None:
        """What the first call cost beyond its steps: the price of a program of a new size."""
        if self.first_call is None or self.step is None:
            return None
        return max(0.0, self.first_call - self.first_steps * self.step)


def cheaper_with_spare_slots(k: int, steps: int, slots: int, times: CallTimes) -> float | None:
    """The seconds saved by training k trials of `steps` steps each in a measured program of
    `slots` > k slots rather than compiling one of k (None: not cheaper, or not measured).

    Compiling one's own is taken to cost this program's compile, and to train at the same
    per-trial rate (k/slots of its step): a smaller group's rate is no better, so this
    leans towards compiling."""
    if slots <= k or times.step is None or times.compile_seconds is None:
        return None
    spare_seconds = steps * times.step * (slots - k) / slots
    saved = times.compile_seconds - spare_seconds
    return saved if saved > 0 else None


def best_spare_program(k: int, steps: int, candidates: Iterable[tuple[int, CallTimes, object]]):
    """Of `candidates` (slots, call times, program), the program that saves the most time over
    compiling one for k trials, or None."""
    savings = [(saved, slots, program) for slots, times, program in candidates
               if (saved := cheaper_with_spare_slots(k, steps, slots, times)) is not None]
    if not savings:
        return None
    return max(savings, key=lambda s: (s[0], -s[1]))[2]
