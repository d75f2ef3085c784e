"""Random search: every job is a fresh uniform sample trained at the full budget. In a finite
space (ints and choices, none conditional) no config runs twice, and once every config has
been asked the search is finished (as Keras Tuner's random search stops)."""

from __future__ import annotations

from typing import Any

from hpo.search.base import Searcher, config_key
from hpo.trial import Job

# Draws before a finite space's last unseen configs are picked from a list of them instead.
REDRAWS = 200


class RandomSearch(Searcher):
    """Uniform sampling at `max_budget` (Bergstra and Bengio, JMLR 2012). Keyword arguments
    as `Searcher`'s; `max_budget` defaults to 1 here (a budget-free objective), where the
    multi-fidelity searchers default to 27."""

    def __init__(self, space, **kwargs):
        super().__init__(space, **kwargs)
        self._count = self.space.config_count()
        self._asked_configs: set[str] = set()

    @property
    def promotes(self) -> bool:
        return False

    def _next_job(self) -> Job | None:
        if self._count is not None and len(self._asked_configs) >= self._count:
            return None       # every config of the space has been asked: the search is finished
        config = self._propose(self.max_budget)
        if self._count is not None:     # only a finite space is ever used up
            config = self._unasked(config)
            self._asked_configs.add(config_key(config))
        return self._new_job(config, self.max_budget)

    def _unasked(self, config: dict[str, Any]) -> dict[str, Any]:
        """`config`, or a redraw where it was asked before (the draws stay the same as long as
        no config repeats, so a study resumes by replay as before)."""
        for _ in range(REDRAWS):
            if config_key(config) not in self._asked_configs:
                return config
            config = self._propose(self.max_budget)
        left = [c for c in self.space.every_config() if config_key(c) not in self._asked_configs]
        return left[int(self.rng.integers(len(left)))]
