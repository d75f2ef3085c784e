"""A Gaussian process over configurations, for proposing new ones by expected improvement:
what `FreezeThaw` proposes from (its `model="gp"`), fitted to its lineages' predicted final
losses. Configurations are unit-cube vectors (`hpo.search.kde.dimensions_of`); numpy and
scipy only."""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import minimize
from scipy.special import ndtri

from hpo.search.learning_curves import expected_improvement


class ConfigGP:
    """A Gaussian process over configurations (unit-cube vectors) of the lineages' predicted
    final losses, rank-transformed to normal scores (robust to diverged runs' losses):
    Matern 5/2 with one lengthscale per dimension (a choice: 0 or 1 apart), fitted by
    marginal likelihood (refitted as the rows grow by a quarter, warm-started). `noise`: per
    row, added to NOISE, in the normal scores' units (how uncertain each row's loss is: a
    lineage's predicted final loss against one observed there)."""

    NOISE = 0.1

    def __init__(self, vectors: np.ndarray, losses: np.ndarray, dims, log_scales: np.ndarray | None,
                 noise: np.ndarray | None = None):
        self.unordered = np.array([d.kind == "u" for d in dims])
        self.x = np.where(np.isnan(vectors), 0.5, vectors)
        n = len(losses)
        ranks = np.argsort(np.argsort(losses, kind="stable"), kind="stable")
        self.y = ndtri((ranks + 0.5) / n)
        self.noise = np.full(n, self.NOISE) if noise is None else self.NOISE + np.asarray(noise, dtype=float)
        if log_scales is None:
            log_scales = self._fit(np.full(len(dims), math.log(0.3)))
        self.log_scales = log_scales
        k = self._kernel(self.x, self.x) + np.diag(self.noise)
        self._chol = np.linalg.cholesky(k)
        self._alpha = cho_solve((self._chol, True), self.y)
        self.best = float(self.y.min())

    def _kernel(self, a: np.ndarray, b: np.ndarray, log_scales: np.ndarray | None = None) -> np.ndarray:
        scales = np.exp(self.log_scales if log_scales is None else log_scales)
        ordered = ~self.unordered
        # Scaled squared distances over the ordered dimensions as |a|^2 + |b|^2 - 2 a.b (one
        # matrix product, not a pass per dimension), clipped at 0 against rounding; a choice
        # adds 1 / scale^2 where the two differ.
        sa, sb = a[:, ordered] / scales[ordered], b[:, ordered] / scales[ordered]
        squared = (sa * sa).sum(axis=1)[:, None] + (sb * sb).sum(axis=1)[None, :] - 2.0 * (sa @ sb.T)
        np.maximum(squared, 0.0, out=squared)
        for j in np.flatnonzero(self.unordered):
            squared += (np.abs(a[:, j, None] - b[None, :, j]) > 1e-9) / (scales[j] * scales[j])
        r = np.sqrt(np.multiply(squared, 5.0, out=squared), out=squared)
        out = r * r
        out *= 1.0 / 3.0
        out += r
        out += 1.0
        out *= np.exp(-r)
        return out

    def _nll(self, log_scales: np.ndarray) -> float:
        k = self._kernel(self.x, self.x, log_scales) + np.diag(self.noise)
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return 1e10
        alpha = cho_solve((chol, True), self.y)
        # A weak log-normal prior around 0.5 (sd 1.5 in log) keeps a lengthscale off its bounds.
        prior = 0.5 * ((log_scales - math.log(0.5)) ** 2).sum() / 1.5 ** 2
        return float(0.5 * self.y @ alpha + np.log(np.diag(chol)).sum() + prior)

    def _fit(self, start: np.ndarray) -> np.ndarray:
        result = minimize(self._nll, start, method="L-BFGS-B", bounds=[(math.log(0.03), math.log(10.0))] * len(start),
                          options={"maxiter": 30})
        return result.x

    def expected_improvement(self, points: np.ndarray) -> np.ndarray:
        """EI below the best row's normal score, per unit-cube row of `points`."""
        points = np.where(np.isnan(points), 0.5, points)
        ks = self._kernel(points, self.x)
        mean = ks @ self._alpha
        v = solve_triangular(self._chol, ks.T, lower=True)
        std = np.sqrt(np.maximum(1.0 + 1e-9 - (v * v).sum(axis=0), 1e-12))
        return expected_improvement(mean, std, self.best)
