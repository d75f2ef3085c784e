"""A product kernel density estimator over the unit hypercube, for BOHB.

Three kernels, one per kind of dimension:
- continuous ('c'): a Gaussian truncated to [0, 1], so no mass leaks past the bounds;
- ordinal ('o'): Gaussian weights over the finite set of level positions, normalised over
  the levels (integers keep their order and, for log scales, their log spacing);
- unordered ('u'): Aitchison and Aitken (1976): keep the category with probability
  1 - lambda, else any other uniformly.
Bandwidths follow Scott's rule, 1.06 * sigma * n^(-1 / (d + 4)), floored at `min_bandwidth`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from hpo.space import ChoiceParam, IntParam, SearchSpace

# Ints with more levels than this are modelled as continuous and rounded when decoded:
# the ordinal kernel's cost grows with the level count, and at this resolution the two agree.
MAX_ORDINAL_LEVELS = 64
_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


@dataclass(frozen=True)
class Dimension:
    kind: str                       # 'c', 'o' or 'u'
    levels: np.ndarray | None = None  # unit-cube positions of the values ('o' and 'u')

    def snap(self, column: np.ndarray) -> np.ndarray:
        """Level index of each unit-cube value (for 'o' and 'u')."""
        return np.abs(column[:, None] - self.levels[None, :]).argmin(axis=1)


def dimensions_of(space: SearchSpace) -> list[Dimension]:
    dims = []
    for p in space:
        if isinstance(p, ChoiceParam):
            dims.append(Dimension("u", np.array([p.to_unit(v) for v in p.values])))
        elif isinstance(p, IntParam) and p.high - p.low + 1 <= MAX_ORDINAL_LEVELS:
            dims.append(Dimension("o", np.array([p.to_unit(v) for v in range(p.low, p.high + 1)])))
        else:
            dims.append(Dimension("c"))
    return dims


def impute(data: np.ndarray, dims: list[Dimension], rng: np.random.Generator) -> np.ndarray:
    """Fill inactive (NaN) entries so every point has a full vector: with a value some other
    point of the same set has there, else a uniform draw over the dimension."""
    data = data.copy()
    for j, dim in enumerate(dims):
        missing = np.isnan(data[:, j])
        if not missing.any():
            continue
        observed = data[~missing, j]
        if observed.size:
            data[missing, j] = rng.choice(observed, size=missing.sum())
        elif dim.levels is not None:
            data[missing, j] = rng.choice(dim.levels, size=missing.sum())
        else:
            data[missing, j] = rng.random(missing.sum())
    return data


class KDE:
    def __init__(self, data: np.ndarray, dims: list[Dimension], min_bandwidth: float = 1e-3):
        self.data = np.asarray(data, dtype=float)
        self.dims = dims
        n, d = self.data.shape
        sigma = self.data.std(axis=0) if n > 1 else np.zeros(d)
        self.bandwidth = np.maximum(1.06 * sigma * n ** (-1.0 / (d + 4)), min_bandwidth)
        # Categorical lambda lives in [0, (k-1)/k]; (k-1)/k is the uniform distribution.
        self._index = {j: dim.snap(self.data[:, j]) for j, dim in enumerate(dims) if dim.levels is not None}

    def _unordered_lambda(self, j: int, factor: float = 1.0) -> float:
        k = len(self.dims[j].levels)
        return float(min(self.bandwidth[j] * factor, (k - 1) / k))

    # --- density ------------------------------------------------------------------------
    def log_pdf(self, points: np.ndarray) -> np.ndarray:
        """log density at each row of `points` (m x d)."""
        points = np.asarray(points, dtype=float)
        total = np.zeros((points.shape[0], self.data.shape[0]))
        for j, dim in enumerate(self.dims):
            x, centres, h = points[:, j], self.data[:, j], self.bandwidth[j]
            if dim.kind == "c":
                z = (x[:, None] - centres[None, :]) / h
                mass = ndtr((1 - centres) / h) - ndtr(-centres / h)
                total += -0.5 * z ** 2 - _LOG_SQRT_2PI - np.log(h) - np.log(np.maximum(mass, 1e-300))[None, :]
            elif dim.kind == "o":
                weights = self._ordinal_log_weights(j, h)              # (n, levels)
                total += weights[:, dim.snap(x)].T
            else:
                k = len(dim.levels)
                lam = self._unordered_lambda(j)
                same = dim.snap(x)[:, None] == self._index[j][None, :]
                total += np.where(same, np.log(1 - lam), np.log(lam / (k - 1)) if lam > 0 else -np.inf)
        peak = total.max(axis=1, keepdims=True)
        peak = np.where(np.isfinite(peak), peak, 0.0)
        return (peak[:, 0] + np.log(np.exp(total - peak).sum(axis=1))) - np.log(self.data.shape[0])

    def _ordinal_log_weights(self, j: int, h: float) -> np.ndarray:
        levels, centres = self.dims[j].levels, self.data[:, j]
        logits = -0.5 * ((levels[None, :] - centres[:, None]) / h) ** 2
        logits -= logits.max(axis=1, keepdims=True)
        return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))

    # --- sampling -----------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, m: int, bandwidth_factor: float = 1.0) -> np.ndarray:
        """m points: each around a uniformly chosen data point, bandwidths widened by the factor."""
        centres = self.data[rng.integers(0, self.data.shape[0], size=m)]
        out = np.empty_like(centres)
        for j, dim in enumerate(self.dims):
            c = centres[:, j]
            h = self.bandwidth[j] * bandwidth_factor
            u = rng.random(m)
            if dim.kind == "c":
                lo, hi = ndtr(-c / h), ndtr((1 - c) / h)
                out[:, j] = np.clip(c + h * ndtri(np.clip(lo + u * (hi - lo), 1e-12, 1 - 1e-12)), 0.0, 1.0)
            elif dim.kind == "o":
                logits = -0.5 * ((dim.levels[None, :] - c[:, None]) / h) ** 2
                probs = np.exp(logits - logits.max(axis=1, keepdims=True))
                cumulative = np.cumsum(probs, axis=1)
                pick = (cumulative < (u * cumulative[:, -1])[:, None]).sum(axis=1)
                out[:, j] = dim.levels[np.minimum(pick, len(dim.levels) - 1)]
            else:
                k = len(dim.levels)
                lam = self._unordered_lambda(j, bandwidth_factor)
                index = dim.snap(c)
                other = (index + rng.integers(1, k, size=m)) % k if k > 1 else index
                out[:, j] = dim.levels[np.where(u < lam, other, index)]
        return out
