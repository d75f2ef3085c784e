"""Which finished configs failed, for redrawing a new config that lands beside a failure.

A model counts a failed config as its worst result, but a searcher's model-free draws (the
initial design, the random share of proposals) do not read the model, and on a space where a
region fails (a width that runs out of memory, a branch whose build raises) they keep landing
there: under Keras Tuner's default of three consecutive failures a search can stop in its
first trials. A new config whose nearest finished config (in the unit cube, an inactive
parameter at -1 so that branches stand apart, as SMAC3's forest reads them) failed is drawn
again, a few times at most. Nothing changes where nothing has failed, or where nothing has
succeeded yet (no evidence of where the space works).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from hpo.space import SearchSpace

INACTIVE = -1.0


class FailureNeighbours:
    def __init__(self, space: SearchSpace):
        self.space = space
        self._row: dict[tuple, int] = {}
        self._points = np.empty((0, len(space.params)))
        self._failed = np.empty(0, dtype=bool)

    def unit(self, config: Mapping[str, Any]) -> np.ndarray:
        return np.array([p.to_unit(config[p.name]) if p.name in config else INACTIVE for p in self.space.params])

    def record(self, config: Mapping[str, Any], failed: bool) -> None:
        """A finished job's outcome; a config's latest outcome is the one that counts."""
        key = tuple(sorted((name, repr(value)) for name, value in config.items()))
        row = self._row.get(key)
        if row is None:
            row = self._row[key] = len(self._failed)
            self._points = np.vstack([self._points, self.unit(config)])
            self._failed = np.append(self._failed, failed)
        else:
            self._failed[row] = failed

    def beside_failure(self, config: Mapping[str, Any]) -> bool:
        """Whether the finished config nearest to `config` failed (False until something has
        both failed and succeeded)."""
        if not self._failed.any() or self._failed.all():
            return False
        distances = np.sum((self._points - self.unit(config)) ** 2, axis=1)
        return bool(self._failed[int(np.argmin(distances))])
