"""Whether a search that trained nothing stopped because its study is complete, and the limit
that would extend it: one record, which each entry point (`hpo search`, the tuners,
`hpo.optimize`) words in its own arguments."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from hpo.config.schema import SearchConfig
    from hpo.driver.runner import SearchSummary
    from hpo.search.base import Searcher
    from hpo.study import TrialRow

# The reasons a search stops that, where it trained nothing, mean its study had already run.
COMPLETE = ("max_trials", "total_budget", "searcher finished")


@dataclass(frozen=True)
class CompleteStudy:
    """`stopped_because`: which limit it had reached (one of COMPLETE). `trials`: the jobs it
    holds, at least `max_trials` (a study run before with a larger limit holds more).
    `budget_given`: the epochs its trials were given, what `total_budget` limits."""
    stopped_because: str
    trials: int
    max_trials: int | None
    budget_given: float
    total_budget: float | None

    @property
    def next_max_trials(self) -> int:
        """A limit that runs as many trials again as the study holds."""
        return 2 * max(self.trials, self.max_trials or 0)

    @property
    def next_total_budget(self) -> float:
        """A limit that gives another `total_budget` beyond what the trials were given."""
        total = self.total_budget or 0.0
        return math.ceil(max(self.budget_given, total)) + total


def complete_study(summary: SearchSummary, trials: Sequence[TrialRow], search: SearchConfig,
                   searcher: Searcher | None = None) -> CompleteStudy | None:
    """The record for a search that trained nothing and stopped at one of COMPLETE; None for any
    other. `searcher` charges the trials' budgets (`budget_given`) where a total budget stopped it."""
    if summary.trials_finished_now or summary.stopped_because not in COMPLETE:
        return None
    given = 0.0
    if summary.stopped_because == "total_budget" and searcher is not None:
        from hpo.driver.runner import budget_given
        given = budget_given(trials, searcher)
    return CompleteStudy(summary.stopped_because, len(trials), search.max_trials, given, search.total_budget)
