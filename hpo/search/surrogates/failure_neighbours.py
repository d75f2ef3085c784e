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
        self._row: dict[str, int] = {}                         # config key -> row
        self._points = np.empty((64, len(space.params)))       # grown in place: record() runs at every tell
        self._failed = np.zeros(64, dtype=bool)
        self._n_failed = 0

    def unit(self, config: Mapping[str, Any]) -> np.ndarray:
        vector = self.space.to_unit(config)
        vector[np.isnan(vector)] = INACTIVE     # np.nan_to_num costs more than the encoding, at every tell
        return vector

    def record(self, key: str, config: Mapping[str, Any], failed: bool) -> None:
        """A finished job's outcome (`key`: the searcher's `config_key`); a config's latest
        outcome is the one that counts."""
        row = self._row.get(key)
        if row is None:
            row = self._row[key] = len(self._row)
            if row == len(self._failed):
                self._points = np.concatenate([self._points, np.empty_like(self._points)])
                self._failed = np.concatenate([self._failed, np.zeros_like(self._failed)])
            self._points[row] = self.unit(config)
        self._n_failed += int(failed) - int(self._failed[row])
        self._failed[row] = failed

    def beside_failure(self, config: Mapping[str, Any]) -> bool:
        """Whether the finished config nearest to `config` failed (False until something has
        both failed and succeeded)."""
        n = len(self._row)
        if self._n_failed in (0, n):
            return False
        distances = np.sum((self._points[:n] - self.unit(config)) ** 2, axis=1)
        return bool(self._failed[int(np.argmin(distances))])
