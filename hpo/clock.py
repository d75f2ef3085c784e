"""Where the driver reads the time: the real clocks, or a simulated one that an executor moves.

Two readers take the time, each from a clock it is given:
- the runner (`hpo.driver.runner.Runner`, argument `clock`): the search's elapsed time, which
  `search.time_limit` bounds; real: `time.monotonic`;
- the study (`hpo.study.Study.clock`): each trial's created, started and finished times and
  each epoch's; real: `time.time`.
The searchers read no time at all: what they ask depends only on what they were told.

A `SimulatedClock` stands for both. It starts at 0 and moves only when its executor
(`hpo.executors.simulated.SimulatedExecutor`) jumps it to the next trial to finish, so a
simulated search's timestamps are seconds of simulated time since it began, and its
`SimulationReport` says how the workers spent that time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class SimulatedClock:
    """Simulated seconds since the search began; callable, like `time.monotonic`."""

    def __init__(self, start: float = 0.0):
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        if when < self._now:
            raise ValueError(f"a clock does not go back: at {self._now}, asked for {when}")
        self._now = float(when)


@dataclass(frozen=True)
class SimulationReport:
    """What a simulated search measured: its simulated time and its workers' use of it."""

    workers: int
    simulated_seconds: float          # from the start to the last event the driver read
    busy_seconds: float               # worker-seconds spent on trials (cancelled ones up to the cancel)
    trials: int                       # trials submitted
    decision_seconds: tuple[float, ...]   # real seconds the driver took after each finished trial

    @property
    def utilisation(self) -> float:
        """The share of the workers' simulated time spent on trials; NaN when no simulated
        time passed (nothing ran, or every call raised: a call that raised costs no time)."""
        if self.simulated_seconds <= 0:
            return math.nan
        return self.busy_seconds / (self.workers * self.simulated_seconds)

    def __repr__(self) -> str:
        # The decisions are one per trial, thousands in a long search: summed up, not listed.
        median = self.median_decision_seconds
        return (f"SimulationReport(workers={self.workers}, simulated_seconds={self.simulated_seconds:g}, "
                f"busy_seconds={self.busy_seconds:g}, trials={self.trials}, utilisation={self.utilisation:.3f}, "
                f"decisions={len(self.decision_seconds)} (median "
                f"{'-' if median is None else f'{1000 * median:.2f} ms'}))")

    @property
    def median_decision_seconds(self) -> float | None:
        import statistics  # here: `import hpo` reads this module, and statistics costs it milliseconds

        return statistics.median(self.decision_seconds) if self.decision_seconds else None
