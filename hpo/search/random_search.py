"""Random search: every job is a fresh uniform sample trained at the full budget."""

from __future__ import annotations

from hpo.search.base import Searcher
from hpo.trial import Job


class RandomSearch(Searcher):
    """Uniform sampling at `max_budget` (Bergstra and Bengio, JMLR 2012)."""

    def _next_job(self) -> Job:
        return self._new_job(self._propose(self.max_budget), self.max_budget)
