"""A multi-fidelity TPE model for BOHB's new configurations (BOHB's default `model="tpe"`).

BOHB's paper model (`hpo.search.kde`, `model="kde"`) fits a multivariate KDE on the largest
budget that has enough results. Early in a search that is budget 1 only, and later a
handful of points; measured on our multi-fidelity benchmarks it trailed Optuna's TPE with a
Hyperband pruner by 2-16x. This model learns from every result instead:

- **Ranking across budgets** (as Optuna ranks pruned trials): every configuration counts
  once, at the largest budget it reached; configurations are ordered by that budget (deeper
  is better: the schedule promoted it) and then by loss. The best `top_n_percent` form l(x),
  the rest g(x).
- **Univariate Parzen estimators per dimension** (Bergstra et al., NeurIPS 2011): each
  observation gets a truncated Gaussian whose width is the larger gap to its neighbours
  (clipped to [min_bandwidth, 1]), plus one uniform prior component, so every region
  keeps some density. Choices get smoothed category counts (add one).
- `num_samples` candidates are drawn from l(x) and the one maximising l(x)/g(x) is taken,
  scoring only the dimensions active in that candidate.
- Random configurations: the first `n_startup` (at least 10, and d + 2) and then a
  `random_fraction` (default 0: the prior component already explores).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
from scipy.special import ndtr, ndtri

from hpo.search.base import ConfigSampler, check_model_options, config_key, unseen_sample
from hpo.search.kde import dimensions_of
from hpo.space import SearchSpace

class ParzenEstimator:
    """Truncated-Gaussian mixture on [0, 1] with neighbour-gap bandwidths and a uniform prior."""

    def __init__(self, points: np.ndarray, min_bandwidth: float):
        points = np.sort(np.asarray(points, dtype=float))
        n = len(points)
        if n:
            padded = np.concatenate([[0.0], points, [1.0]])
            gaps = np.maximum(points - padded[:-2], padded[2:] - points)
            # Few points: wide kernels; many: as narrow as the data, never below the floor.
            floor = max(min_bandwidth, 1.0 / min(100, n + 1))
            sigmas = np.clip(gaps, floor, 1.0)
        else:
            sigmas = np.empty(0)
        self.mus = np.concatenate([points, [0.5]])
        self.sigmas = np.concatenate([sigmas, [1.0]])                    # the prior component
        mass = ndtr((1 - self.mus) / self.sigmas) - ndtr(-self.mus / self.sigmas)
        # Each component's normalising factor, with the equal mixture weight folded in.
        self._scale = 1.0 / (math.sqrt(2 * math.pi) * self.sigmas * mass * len(self.mus))
        self._inverse_sigmas = 1.0 / self.sigmas

    def log_pdf(self, x: np.ndarray) -> np.ndarray:
        # No max-subtraction is needed: the prior component (sigma 1) keeps every density
        # above ~0.35, and the narrowest kernel bounds it above, so exp cannot under- or overflow.
        # This is the hot loop of ask() (candidates x observations); float32 halves its cost.
        z = ((x[:, None] - self.mus[None, :]) * self._inverse_sigmas[None, :]).astype(np.float32)
        return np.log(np.exp(-0.5 * z * z) @ self._scale.astype(np.float32)).astype(float)

    def sample(self, rng: np.random.Generator, m: int) -> np.ndarray:
        index = rng.integers(0, len(self.mus), size=m)
        mu, sigma = self.mus[index], self.sigmas[index]
        low, high = ndtr(-mu / sigma), ndtr((1 - mu) / sigma)
        u = np.clip(low + rng.random(m) * (high - low), 1e-12, 1 - 1e-12)
        return np.clip(mu + sigma * ndtri(u), 0.0, 1.0)


class CategoryEstimator:
    """Category frequencies, each count plus one (the prior)."""

    def __init__(self, indices: np.ndarray, k: int):
        counts = np.bincount(np.asarray(indices, dtype=int), minlength=k).astype(float) + 1.0
        self.log_p = np.log(counts / counts.sum())
        self.p = counts / counts.sum()

    def log_pdf(self, indices: np.ndarray) -> np.ndarray:
        return self.log_p[indices]

    def sample(self, rng: np.random.Generator, m: int) -> np.ndarray:
        return rng.choice(len(self.p), size=m, p=self.p)


class MultiFidelityTPESampler(ConfigSampler):
    def __init__(self, space: SearchSpace, *, top_n_percent: float = 15, num_samples: int = 64,
                 random_fraction: float = 0.0, min_bandwidth: float = 0.01, n_startup: int | None = None):
        super().__init__(space)
        check_model_options(top_n_percent, random_fraction, num_samples)
        self.top_n_percent = top_n_percent
        self.num_samples = num_samples
        self.random_fraction = random_fraction
        self.min_bandwidth = min_bandwidth
        self.n_startup = max(10, len(space) + 2) if n_startup is None else int(n_startup)
        self.dims = dimensions_of(space)
        self._conditional = any(p.when for p in space)
        self.deepest: dict[str, tuple[float, float, np.ndarray]] = {}   # config -> (budget, loss, unit vector)
        self.seen: set[str] = set()
        self._model: tuple[int, list, list] | None = None

    def observe(self, config: Mapping[str, Any], budget: float, loss: float) -> None:
        key = config_key(config)
        known = self.deepest.get(key)
        if known is None or budget >= known[0]:
            self.deepest[key] = (budget, loss, self.space.to_unit(config))
            self._model = None

    def stats(self) -> dict[str, float]:
        budgets = [b for b, _, _ in self.deepest.values()]
        return {"model_observations": float(len(budgets)), "model_budget": float(max(budgets)) if budgets else -1.0}

    def propose(self, rng: np.random.Generator, budget: float, pending: list[Mapping[str, Any]]) -> dict[str, Any]:
        # Always draw the coin, so the random stream does not depend on whether a model exists.
        use_random = rng.random() < self.random_fraction
        config = None
        if not use_random and len(self.deepest) >= self.n_startup:
            config = self._best_candidate(rng, pending)
        if config is None:
            config = self._fresh_random(rng, pending)
        self.seen.add(config_key(config))
        return config

    def _fit(self) -> tuple[list, list]:
        if self._model is not None and self._model[0] == len(self.deepest):
            return self._model[1], self._model[2]
        ranked = sorted(self.deepest.values(), key=lambda item: (-item[0], item[1]))
        vectors = np.array([vector for _, _, vector in ranked])
        n_good = max(1, int(math.ceil(self.top_n_percent * len(ranked) / 100)))
        good, bad = vectors[:n_good], vectors[n_good:]
        models = []
        for part in (good, bad):
            per_dim = []
            for j, dim in enumerate(self.dims):
                column = part[:, j]
                column = column[~np.isnan(column)]        # inactive conditionals say nothing here
                if dim.kind == "u":
                    per_dim.append(CategoryEstimator(dim.snap(column) if column.size else np.empty(0, int),
                                                     len(dim.levels)))
                else:
                    per_dim.append(ParzenEstimator(column, self.min_bandwidth))
            models.append(per_dim)
        self._model = (len(self.deepest), models[0], models[1])
        return models[0], models[1]

    def _best_candidate(self, rng: np.random.Generator, pending) -> dict[str, Any] | None:
        good, bad = self._fit()
        m = self.num_samples
        candidates = np.empty((m, len(self.dims)))
        scores = np.empty((m, len(self.dims)))
        for j, dim in enumerate(self.dims):
            if dim.kind == "u":
                index = good[j].sample(rng, m)
                candidates[:, j] = dim.levels[index]
                scores[:, j] = good[j].log_pdf(index) - bad[j].log_pdf(index)
            else:
                x = good[j].sample(rng, m)
                if dim.kind == "o":                       # ordinal: onto the nearest level
                    x = dim.levels[dim.snap(x)]
                candidates[:, j] = x
                scores[:, j] = good[j].log_pdf(x) - bad[j].log_pdf(x)
        taken = self.seen | {config_key(c) for c in pending}
        if not self._conditional:
            total = scores.sum(axis=1)
            for index in np.argsort(-total, kind="stable"):
                config = self.space.from_unit(candidates[index])
                if config_key(config) not in taken:
                    return config
            return None
        configs = [self.space.from_unit(row) for row in candidates]
        active = np.array([[name in config for name in self.space.names] for config in configs])
        total = np.where(active, scores, 0.0).sum(axis=1)            # log l(x)/g(x) over active dims
        for index in np.argsort(-total, kind="stable"):
            if config_key(configs[index]) not in taken:
                return configs[index]
        return None

    def _fresh_random(self, rng: np.random.Generator, pending) -> dict[str, Any]:
        return unseen_sample(self.space, rng, self.seen, pending)
