"""A Gaussian process over configurations, for proposing new ones by expected improvement:
what `FreezeThaw` proposes from (its `model="gp"`, fitted to its lineages' predicted final
losses) and BOHB's `model="gp"` (`hpo.search.surrogates.bohb_gp`, fitted to the results at
every trusted budget, `fit_on`).
Configurations are unit-cube vectors (`hpo.search.surrogates.kde.dimensions_of`); numpy and scipy only.

`expected_improvement_candidates` is the search both run over the process: uniform draws
and neighbours of the best configs (SMAC's local search around its incumbents, as
candidates; a step past a bound lands on it), then, for FreezeThaw, a finer round around
the candidates of the largest expected improvement. `inside_bounds` and `first_unseen`
turn the scored candidates into the config both propose."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.linalg.lapack import dpotri
from scipy.optimize import minimize
from scipy.special import ndtri

from hpo.search.base import config_key
from hpo.search.surrogates.learning_curves import expected_improvement

# The candidates: GP_RANDOM_CANDIDATES uniform draws and GP_LOCAL_CANDIDATES neighbours of
# the best configs given (at most LOCAL_TOP), LOCAL_MOVES numeric values moved on average by
# N(0, LOCAL_SD) in the unit cube; then REFINE_CANDIDATES neighbours, moved by N(0,
# REFINE_SD), of the REFINE_TOP candidates of the largest expected improvement (one step of
# SMAC3's local search: it helped FreezeThaw on LCBench and MFHartmann, and cost BOHB's
# process on LCBench; benchmarks/notes/freeze_thaw.md, "Freeze-thaw's Gaussian process: uncertain
# lineages and a finer round"; benchmarks/notes/published_bohb.md, "BOHB's Gaussian process: why it
# lost MFHartmann").
GP_RANDOM_CANDIDATES = 256
GP_LOCAL_CANDIDATES = 256
LOCAL_TOP, LOCAL_MOVES, LOCAL_SD = 5, 2.0, 0.15
REFINE_TOP, REFINE_CANDIDATES, REFINE_SD = 8, 128, 0.05
# A caller refits the lengthscales only once its rows have grown by this factor since the
# last fit (between refits the process is refactored on the kept lengthscales).
REFIT_GROWTH = 1.25
# A candidate on a bound is decoded from just inside it: exp(log(low) + 1.0 * (log(high) -
# log(low))) can round past `high`.
BOUND_MARGIN = 1e-9


class ConfigGP:
    """A Gaussian process over configurations (unit-cube vectors) of losses rank-transformed
    to normal scores (robust to diverged runs' losses): Matern 5/2 with one lengthscale per
    dimension (a choice: 0 or 1 apart), fitted by marginal likelihood with a weak prior
    around 0.5 (refitted by the caller as the rows grow, warm-started from `log_scales`).
    `base_noise`: the noise variance every row has, in the normal scores' units (default
    NOISE); `noise`: per row, added to it (FreezeThaw: how uncertain a lineage's predicted
    final loss is against one observed there); `inactive`: the value an inactive parameter
    (NaN in a vector) takes in the inputs."""

    NOISE = 0.1

    def __init__(self, vectors: np.ndarray, losses: np.ndarray, dims, log_scales: np.ndarray | None,
                 noise: np.ndarray | None = None, base_noise: float | None = None, inactive: float = 0.5):
        self.unordered = np.array([d.kind == "u" for d in dims])
        self.inactive = float(inactive)
        self.x = np.where(np.isnan(vectors), self.inactive, vectors)
        # Which rows differ in each choice: every step of the lengthscale fit reads them.
        self._rows_differ = [_differs(self.x[:, j], self.x[:, j]) for j in np.flatnonzero(self.unordered)]
        n = len(losses)
        ranks = np.argsort(np.argsort(losses, kind="stable"), kind="stable")
        self.y = ndtri((ranks + 0.5) / n)
        # A failed config's loss is +inf: all of them share the worst score of any row, so
        # that a region that fails reads as worse than every result. (Measured on a space
        # where half of one parameter's range fails, tests/unit/test_failures_teach.py: the
        # worst score a failure ranked at, rather than the worst of all, left FreezeThaw's best
        # 3.3 times the clean space's at 150 jobs, and 1.4 times with the worst of all.)
        failed = ~np.isfinite(losses)
        if failed.any():
            self.y[failed] = self.y[failed].max()
        base = self.NOISE if base_noise is None else float(base_noise)
        self.noise = np.full(n, base) if noise is None else base + np.asarray(noise, dtype=float)
        if log_scales is None:
            log_scales = self._fit(np.full(len(dims), math.log(0.3)))
        self.log_scales = log_scales
        k = _matern(self._distance(self.x, self.x, differ=self._rows_differ)) + np.diag(self.noise)
        self._chol = np.linalg.cholesky(k)
        self._alpha = cho_solve((self._chol, True), self.y)
        self.best = float(self.y.min())

    def _kernel(self, a: np.ndarray, b: np.ndarray, log_scales: np.ndarray | None = None) -> np.ndarray:
        return _matern(self._distance(a, b, log_scales))

    def _distance(self, a: np.ndarray, b: np.ndarray, log_scales: np.ndarray | None = None,
                  differ: list[np.ndarray] | None = None) -> np.ndarray:
        """r = sqrt(5 * sum_j d_j^2 / scale_j^2) between the rows of `a` and of `b`, the
        Matern 5/2 kernel's argument; a choice's d_j is 1 where the two differ, else 0
        (`differ`: those masks per choice, where the caller has them)."""
        scales = np.exp(self.log_scales if log_scales is None else log_scales)
        ordered = ~self.unordered
        # Scaled squared distances over the ordered dimensions as |a|^2 + |b|^2 - 2 a.b (one
        # matrix product, not a pass per dimension), clipped at 0 against rounding.
        sa, sb = a[:, ordered] / scales[ordered], b[:, ordered] / scales[ordered]
        squared = (sa * sa).sum(axis=1)[:, None] + (sb * sb).sum(axis=1)[None, :] - 2.0 * (sa @ sb.T)
        np.maximum(squared, 0.0, out=squared)
        for i, j in enumerate(np.flatnonzero(self.unordered)):
            squared += (_differs(a[:, j], b[:, j]) if differ is None else differ[i]) / (scales[j] * scales[j])
        return np.sqrt(np.multiply(squared, 5.0, out=squared), out=squared)

    def _nll(self, log_scales: np.ndarray) -> tuple[float, np.ndarray]:
        """The negative log marginal likelihood at `log_scales`, with its gradient: the fit
        takes one Cholesky factor a step, where a finite-difference gradient took one more per
        dimension."""
        r = self._distance(self.x, self.x, log_scales, self._rows_differ)
        decay = np.exp(-r)              # the kernel's and its gradient's
        k = _matern(r, decay)
        k[np.diag_indices_from(k)] += self.noise
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return 1e10, np.zeros_like(log_scales)
        alpha = cho_solve((chol, True), self.y)
        # A weak log-normal prior around 0.5 (sd 1.5 in log) keeps a lengthscale off its bounds.
        offset = log_scales - math.log(0.5)
        value = float(0.5 * self.y @ alpha + np.log(np.diag(chol)).sum() + 0.5 * (offset ** 2).sum() / 1.5 ** 2)
        # d nll / d log_scale_j = 0.5 sum((K^-1 - alpha alpha^T) * dK_j), where the Matern 5/2
        # kernel gives dK_j = (5 / 3) (1 + r) exp(-r) d_j^2 / scale_j^2.
        lower, info = dpotri(chol, lower=1)
        if info != 0:
            return 1e10, np.zeros_like(log_scales)
        weights = np.tril(lower) + np.tril(lower, -1).T       # K^-1 from its lower triangle
        weights -= np.outer(alpha, alpha)
        r += 1.0
        r *= decay
        weights *= r
        weights *= 5.0 / 3.0
        summed = np.empty(len(log_scales))
        ordered = np.flatnonzero(~self.unordered)
        x = self.x[:, ordered]
        # sum_ab M_ab (x_a - x_b)^2 = 2 sum_a x_a^2 (M 1)_a - 2 x^T M x, for symmetric M.
        summed[ordered] = 2.0 * (weights.sum(axis=1) @ (x * x)) - 2.0 * np.einsum("aj,aj->j", x, weights @ x)
        for i, j in enumerate(np.flatnonzero(self.unordered)):
            summed[j] = (weights * self._rows_differ[i]).sum()
        gradient = 0.5 * summed * np.exp(-2.0 * log_scales) + offset / 1.5 ** 2
        return value, gradient

    def _fit(self, start: np.ndarray) -> np.ndarray:
        result = minimize(self._nll, start, jac=True, method="L-BFGS-B",
                          bounds=[(math.log(0.03), math.log(10.0))] * len(start), options={"maxiter": 30})
        return result.x

    def _posterior(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(inputs, mean, std, v) at the unit-cube rows `points`: v = L^-1 k(rows, points), what
        the posterior covariance between points takes off the prior's."""
        points = np.where(np.isnan(points), self.inactive, points)
        ks = self._kernel(points, self.x)
        v = solve_triangular(self._chol, ks.T, lower=True, check_finite=False)
        std = np.sqrt(np.maximum(1.0 + 1e-9 - (v * v).sum(axis=0), 1e-12))
        return points, ks @ self._alpha, std, v

    def expected_improvement(self, points: np.ndarray, best: float | None = None) -> np.ndarray:
        """EI below `best` (default: the best row's normal score), per unit-cube row of `points`."""
        _, mean, std, _ = self._posterior(points)
        return expected_improvement(mean, std, self.best if best is None else best)

    def sample(self, rng: np.random.Generator, points: np.ndarray, keep: int) -> np.ndarray:
        """One joint draw of the posterior (Thompson sampling) over the `keep` unit-cube rows
        of `points` of the lowest mean - 2 std; the others get values above every draw, in
        the order of their mean - 2 std, so that a caller that cannot take a drawn one falls
        back on the likeliest of the rest."""
        points, mean, std, v = self._posterior(points)
        optimistic = mean - 2.0 * std
        kept = np.argsort(optimistic, kind="stable")[:keep]
        covariance = self._kernel(points[kept], points[kept]) - v[:, kept].T @ v[:, kept]
        covariance[np.diag_indices_from(covariance)] += 1e-6
        # An eigendecomposition, not a Cholesky factor: near-duplicate candidates can leave the
        # covariance singular to rounding even so.
        values, vectors = np.linalg.eigh(covariance)
        drawn = mean[kept] + vectors @ (np.sqrt(np.maximum(values, 0.0)) * rng.standard_normal(len(kept)))
        out = optimistic + (drawn.max() - optimistic.min() + 1.0)
        out[kept] = drawn
        return out


def _matern(r: np.ndarray, decay: np.ndarray | None = None) -> np.ndarray:
    """The Matern 5/2 kernel (1 + r + r^2 / 3) exp(-r), computed in place over `r`'s copy;
    `decay`: exp(-r), where the caller has it already."""
    out = r * r
    out *= 1.0 / 3.0
    out += r
    out += 1.0
    out *= np.exp(-r) if decay is None else decay
    return out


def _differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether the values of an unordered choice in column `a` and column `b` differ, pair by
    pair (rows of `a` by rows of `b`): such a choice is 0 or 1 apart."""
    return np.abs(a[:, None] - b[None, :]) > 1e-9


def neighbours(rng: np.random.Generator, vectors: np.ndarray, dims, m: int, sd: float) -> np.ndarray:
    """m neighbours of the unit-cube rows `vectors` (each from one drawn at random): each
    numeric dimension moved by N(0, sd) with probability LOCAL_MOVES / dimensions, clipped to
    the unit cube (a step past a bound lands on it), a choice redrawn with that probability."""
    base = vectors[rng.integers(0, len(vectors), size=m)]
    d = len(dims)
    move = rng.random((m, d)) < min(1.0, LOCAL_MOVES / d)
    out = base.copy()
    for j, dim in enumerate(dims):
        if dim.kind == "u":
            moved = dim.levels[rng.integers(0, len(dim.levels), size=m)]
        else:
            moved = np.clip(base[:, j] + rng.normal(0.0, sd, size=m), 0.0, 1.0)
            if dim.kind == "o":
                moved = dim.levels[dim.snap(moved)]
        out[:, j] = np.where(move[:, j], moved, base[:, j])
    return out


def expected_improvement_candidates(rng: np.random.Generator, dims, best_rows: np.ndarray,
                                    score: Callable[[np.ndarray], np.ndarray],
                                    refine: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(candidates, their scores): GP_RANDOM_CANDIDATES uniform draws and GP_LOCAL_CANDIDATES
    neighbours of the unit-cube rows `best_rows` (the best configs, best first; the first
    LOCAL_TOP are used), scored by `score` (the expected improvement of unit-cube rows); with
    `refine`, then REFINE_CANDIDATES finer neighbours of the REFINE_TOP candidates of the
    highest score."""
    uniform = rng.random((GP_RANDOM_CANDIDATES, len(dims)))
    for j, dim in enumerate(dims):
        if dim.kind != "c":
            uniform[:, j] = dim.levels[dim.snap(uniform[:, j])]
    candidates = np.concatenate([uniform, neighbours(rng, best_rows[:LOCAL_TOP], dims, GP_LOCAL_CANDIDATES,
                                                     LOCAL_SD)])
    scores = score(candidates)
    if not refine:
        return candidates, scores
    top = candidates[np.argsort(-scores, kind="stable")[:REFINE_TOP]]
    finer = neighbours(rng, top, dims, REFINE_CANDIDATES, REFINE_SD)
    return np.concatenate([candidates, finer]), np.concatenate([scores, score(finer)])


def best_and_latest(scores: np.ndarray, limit: int) -> np.ndarray:
    """Indices of at most `limit` of the rows scored `scores` (oldest first, lower is better):
    all of them where they fit, else the best half by score and the latest half of the rest,
    in that order (the process keeps its incumbents and follows where the search is now)."""
    if len(scores) <= limit:
        return np.arange(len(scores))
    half = limit // 2
    # The best half as a stable sort ranks them (a tie goes to the older row), found by a
    # partition: the rows are a long search's thousands, of which `limit` are kept.
    cut = np.partition(scores, half - 1)[half - 1]
    if np.isnan(cut):
        best = np.argsort(scores, kind="stable")[:half]
    else:
        below = np.flatnonzero(scores < cut)
        tied = np.flatnonzero(scores == cut)[:half - len(below)]
        best = np.sort(np.concatenate([below, tied]))
        best = best[np.argsort(scores[best], kind="stable")]
    rest = np.ones(len(scores), dtype=bool)
    rest[best] = False
    return np.concatenate([best, np.flatnonzero(rest)[-half:]])


def inside_bounds(candidates: np.ndarray) -> np.ndarray:
    """Unit-cube candidates moved just inside the cube's bounds, to be decoded into configs."""
    return np.clip(candidates, BOUND_MARGIN, 1.0 - BOUND_MARGIN)


def first_unseen(space, decoded: np.ndarray, scores: np.ndarray, taken) -> dict[str, Any] | None:
    """The config (`space.from_unit(decoded[i])`, decoded only as far as needed) of the highest
    score whose key is not in `taken`. None when every candidate is taken."""
    for index in np.argsort(-scores, kind="stable"):
        config = space.from_unit(decoded[index])
        if config_key(config) not in taken:
            return config
    return None
