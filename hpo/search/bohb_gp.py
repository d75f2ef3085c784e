"""A Gaussian-process config model for BOHB (`BOHB(model="gp")`; the default stays "tpe").

Everything but the proposal is the multi-fidelity TPE's (`hpo.search.tpe`): the ranking
across budgets, the rung-agreement guards and the brackets BOHB skips, the climbing bracket,
the Latin hypercube opening, the probes. Where the TPE would draw from l(x) and take the
best l(x) / g(x), this model fits a Gaussian process (`ConfigGP`: Matern 5/2, one
lengthscale per dimension by marginal likelihood, on normal scores of ranks; a copy of
`hpo.search.config_gp`'s, FreezeThaw's, with a faster kernel) and proposes the config of the
largest expected improvement among GP_RANDOM_CANDIDATES uniform draws and
GP_LOCAL_CANDIDATES neighbours of the LOCAL_TOP best configs (SMAC's local search around its
incumbents, as candidates). What it is fitted on (`fit_on`):

- "joint" (default): every result at a trusted budget, with the budget (log scale, 0 to 1
  over the trusted budgets with results) as one more input; EI is taken at the top budget
  against the best result there. Results at lower budgets of configs proposed since the top
  budget last changed move the process, so one bracket's proposals do not pile into one
  region.
- "top": the losses at the largest budget with at least `n_startup` results (until then the
  TPE proposes). A bracket's proposals all come from the same process and cluster: it lost
  branin_mf and MFHartmann at 132 full-budget evaluations (benchmarks/RESULTS.md).
- "ranking": the ranking the TPE splits (deeper first, then by loss, the worse half of a
  budget after the better half of every budget, untrusted budgets left out).

`incumbent="mean"` takes EI below the best posterior mean at the rows instead of the best
observed score; `learn_noise` fits the noise by marginal likelihood too (else 0.1 on the
normal scores). A conditional space keeps the TPE's proposals (the Gaussian process would
read an inactive value as the middle of its range), and so does a space with priors (their
learnt share was measured with the TPE: with the process, a wrong prior cost more than
`tests/unit/test_priors.py` allows).

ask() stays cheap: the process is fitted on at most MAX_GP_ROWS rows (the best half and
the latest half), refactored only when a result arrived, and its lengthscales are refitted
only when the rows it could be fitted on have grown by a quarter since the last fit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import minimize
from scipy.special import ndtri

from hpo.search.base import config_key
from hpo.search.kde import Dimension
from hpo.search.learning_curves import expected_improvement
from hpo.search.tpe import MultiFidelityTPESampler
from hpo.space import SearchSpace

GP_RANDOM_CANDIDATES = 256
GP_LOCAL_CANDIDATES = 256
LOCAL_TOP, LOCAL_MOVES, LOCAL_SD = 5, 2.0, 0.15
MAX_GP_ROWS = 150
REFIT_GROWTH = 1.25
BOUND_MARGIN = 1e-9
FIT_ON = ("ranking", "top", "joint")


class ConfigGP:
    """A Gaussian process over unit-cube configurations, on normal scores of the ranks of
    the values it is given (robust to diverged runs' losses): Matern 5/2 with one lengthscale
    per dimension (a choice: 0 or 1 apart), fitted by marginal likelihood with a weak prior
    around 0.5. `hpo.search.config_gp`'s (FreezeThaw's) process, with the squared distances of
    the numeric dimensions from one matrix product, so that an ask stays in the milliseconds."""

    NOISE = 0.1
    NOISE_BOUNDS = (1e-3, 1.0)

    def __init__(self, vectors: np.ndarray, values: np.ndarray, dims, log_scales: np.ndarray | None,
                 learn_noise: bool = False):
        self.unordered = np.array([d.kind == "u" for d in dims])
        self.x = np.where(np.isnan(vectors), 0.5, vectors)
        n = len(values)
        ranks = np.argsort(np.argsort(values, kind="stable"), kind="stable")
        self.y = ndtri((ranks + 0.5) / n)
        self.learn_noise = learn_noise
        if log_scales is None:
            start = np.full(len(dims) + learn_noise, math.log(0.3))
            if learn_noise:
                start[-1] = math.log(self.NOISE)
            log_scales = self._fit(start)
        self.log_scales = log_scales        # with learn_noise, the log noise last
        self.noise = math.exp(log_scales[-1]) if learn_noise else self.NOISE
        k = self._kernel(self.x, self.x)
        self._chol = np.linalg.cholesky(k + self.noise * np.eye(n))
        self._alpha = cho_solve((self._chol, True), self.y)
        self.best = float(self.y.min())
        self.best_mean = float((k @ self._alpha).min())   # the posterior's at the rows

    def _kernel(self, a: np.ndarray, b: np.ndarray, log_scales: np.ndarray | None = None) -> np.ndarray:
        inverse = np.exp(-(self.log_scales if log_scales is None else log_scales))[:len(self.unordered)]
        numeric = ~self.unordered
        sa, sb = a[:, numeric] * inverse[numeric], b[:, numeric] * inverse[numeric]
        squared = (sa * sa).sum(axis=1)[:, None] + (sb * sb).sum(axis=1)[None, :] - 2.0 * sa @ sb.T
        np.maximum(squared, 0.0, out=squared)
        for j in np.flatnonzero(self.unordered):
            squared += (np.abs(a[:, j, None] - b[None, :, j]) > 1e-9) * (inverse[j] * inverse[j])
        r = np.sqrt(5.0 * squared)
        return (1.0 + r + r * r / 3.0) * np.exp(-r)

    def _nll(self, params: np.ndarray) -> float:
        n = len(self.y)
        noise = math.exp(params[-1]) if self.learn_noise else self.NOISE
        k = self._kernel(self.x, self.x, params) + noise * np.eye(n)
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return 1e10
        alpha = cho_solve((chol, True), self.y)
        # A weak log-normal prior around 0.5 (sd 1.5 in log) keeps a lengthscale off its bounds.
        scales = params[:len(self.unordered)]
        prior = 0.5 * ((scales - math.log(0.5)) ** 2).sum() / 1.5 ** 2
        return float(0.5 * self.y @ alpha + np.log(np.diag(chol)).sum() + prior)

    def _fit(self, start: np.ndarray) -> np.ndarray:
        bounds = [(math.log(0.03), math.log(10.0))] * len(self.unordered)
        if self.learn_noise:
            bounds.append(tuple(math.log(b) for b in self.NOISE_BOUNDS))
        return minimize(self._nll, start, method="L-BFGS-B", bounds=bounds, options={"maxiter": 30}).x

    def expected_improvement(self, points: np.ndarray, best: float | None = None) -> np.ndarray:
        """EI below `best` (default: the best row's normal score), per unit-cube row of `points`."""
        points = np.where(np.isnan(points), 0.5, points)
        ks = self._kernel(points, self.x)
        mean = ks @ self._alpha
        v = solve_triangular(self._chol, ks.T, lower=True, check_finite=False)
        std = np.sqrt(np.maximum(1.0 + 1e-9 - (v * v).sum(axis=0), 1e-12))
        return expected_improvement(mean, std, self.best if best is None else best)


class GPSampler(MultiFidelityTPESampler):
    """BOHB's Gaussian-process model; options as the TPE's (`MultiFidelityTPESampler`), plus
    `fit_on` ('ranking' or 'top')."""

    def __init__(self, space: SearchSpace, *, fit_on: str = "joint", incumbent: str = "observed",
                 learn_noise: bool = False, **options):
        super().__init__(space, **options)
        if fit_on not in FIT_ON:
            raise ValueError(f"fit_on must be one of {list(FIT_ON)}, got {fit_on!r}")
        self.fit_on = fit_on
        self.incumbent = incumbent
        self.learn_noise = learn_noise
        self._gp: tuple[tuple, ConfigGP, np.ndarray] | None = None    # (data key, model, its rows' vectors by rank)
        self._scales: tuple[int, np.ndarray] | None = None          # (configs when they were fitted, log lengthscales)

    def _best_candidate(self, rng: np.random.Generator, pending) -> dict[str, Any] | None:
        if self._conditional or self.priors.enabled:
            return super()._best_candidate(rng, pending)
        fitted = self._fit_gp()
        if fitted is None:
            return super()._best_candidate(rng, pending)
        model, ranked = fitted
        d = len(self.dims)
        uniform = rng.random((GP_RANDOM_CANDIDATES, d))
        for j, dim in enumerate(self.dims):
            if dim.kind != "c":
                uniform[:, j] = dim.levels[dim.snap(uniform[:, j])]
        candidates = np.concatenate([uniform, self._neighbours(rng, ranked[:LOCAL_TOP])])
        # A candidate on a bound is decoded from just inside it (exp of a log bound can round past it).
        inside = np.clip(candidates, BOUND_MARGIN, 1.0 - BOUND_MARGIN)
        best = model.best_mean if self.incumbent == "mean" else None
        if self.fit_on == "joint":      # scored at the top budget, against the best result there
            candidates = np.column_stack([candidates, np.ones(len(candidates))])
            best = self._joint_best
        score = model.expected_improvement(candidates, best)
        taken = self.taken(pending)
        for index in np.argsort(-score, kind="stable"):
            config = self.space.from_unit(inside[index])
            if config_key(config) not in taken:
                return config
        return None

    def _fit_gp(self) -> tuple[ConfigGP, np.ndarray] | None:
        """The process (refitted only when a result arrived) and its rows' vectors, best first."""
        key = tuple((b, len(obs)) for b, obs in sorted(self.by_budget.items()))
        if self._gp is not None and self._gp[0] == key:
            return self._gp[1], self._gp[2]
        data = self._rows_to_fit()
        if data is None:
            return None
        vectors, scores = data
        total = len(scores)
        if len(scores) > MAX_GP_ROWS:       # the best half, and the latest half of the rest
            order = np.argsort(scores, kind="stable")
            keep = np.concatenate([order[:MAX_GP_ROWS // 2], np.sort(order[MAX_GP_ROWS // 2:])[-(MAX_GP_ROWS // 2):]])
            vectors, scores = vectors[keep], scores[keep]
        scales = None
        if self._scales is not None and total < REFIT_GROWTH * self._scales[0]:
            scales = self._scales[1]
        dims = self.dims + [Dimension("c")] if self.fit_on == "joint" else self.dims
        model = ConfigGP(vectors, scores, dims, scales, self.learn_noise)
        if scales is None:
            self._scales = (total, model.log_scales)
        if self.fit_on == "joint":
            at_top = vectors[:, -1] >= 1.0
            self._joint_best = float(model.y[at_top].min())
            vectors = vectors[:, :-1]
            order = np.lexsort((scores, ~at_top))      # the top budget's rows first, best first
            ranked = vectors[order]
            self._gp = (key, model, ranked)
            return model, ranked
        ranked = vectors[np.argsort(scores, kind="stable")]
        self._gp = (key, model, ranked)
        return model, ranked

    def _rows_to_fit(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(vectors, scores to minimise) in the order the rows were first observed (latest last)."""
        table = self._table[:len(self._rows)]
        budgets, losses, vectors = table[:, 0], table[:, 1], table[:, 2:]
        if self.fit_on == "joint":
            return self._joint_rows()
        if self.fit_on == "top":
            enough = [b for b, results in self.by_budget.items() if len(results) >= self.n_startup]
            if not enough:
                return None
            top = max(enough)
            rows = [self._rows[key] for key in self.by_budget[top]]
            return vectors[rows], np.array([loss for loss, _ in self.by_budget[top].values()])
        losses = self.split_losses(budgets, losses)
        order = self._ranked_reliable(budgets, losses) if self.rungs == "reliable" \
            else np.lexsort((losses, -budgets))
        if len(order) < 2:
            return None
        rank = np.full(len(budgets), np.nan)
        rank[order] = np.arange(len(order))
        rows = np.sort(order)
        return vectors[rows], rank[rows]

    def _joint_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Every result at a trusted budget as a row: the config's vector and its budget (log
        scale, 0 the lowest trusted budget with a result, 1 the highest), latest last; the
        losses of every budget ranked together (the process learns the budget's shift)."""
        trust = self._reliability() if self.rungs == "reliable" else {}
        budgets = sorted(b for b in self.by_budget if trust.get(b, 1.0) > 0)
        if not budgets or sum(len(self.by_budget[b]) for b in budgets) < 2:
            return None
        low, high = math.log(budgets[0]), math.log(budgets[-1])
        vectors, losses, order = [], [], []
        for b in budgets:
            z = 1.0 if high == low else (math.log(b) - low) / (high - low)
            for key, (loss, _) in self.by_budget[b].items():
                vectors.append(np.append(self.deepest[key][2], z))
                losses.append(loss)
                order.append(self._rows[key] + (b == budgets[-1]) * len(self._rows))
        keep = np.argsort(order, kind="stable")     # older configs first, the top budget's rows last
        return np.array(vectors)[keep], np.array(losses)[keep]

    def _neighbours(self, rng: np.random.Generator, base_rows: np.ndarray) -> np.ndarray:
        """GP_LOCAL_CANDIDATES neighbours of `base_rows`: each numeric value moved by a Gaussian
        step with probability LOCAL_MOVES / dimensions (a step past a bound lands on it), a
        choice redrawn with that probability."""
        m, d = GP_LOCAL_CANDIDATES, len(self.dims)
        base = base_rows[rng.integers(0, len(base_rows), size=m)]
        move = rng.random((m, d)) < min(1.0, LOCAL_MOVES / d)
        out = base.copy()
        for j, dim in enumerate(self.dims):
            if dim.kind == "u":
                moved = dim.levels[rng.integers(0, len(dim.levels), size=m)]
            else:
                moved = np.clip(base[:, j] + rng.normal(0.0, LOCAL_SD, size=m), 0.0, 1.0)
                if dim.kind == "o":
                    moved = dim.levels[dim.snap(moved)]
            out[:, j] = np.where(move[:, j], moved, base[:, j])
        return out

    def stats(self) -> dict[str, float]:
        stats = super().stats()
        if self._scales is not None:
            stats["gp_rows_fitted"] = float(self._scales[0])
        return stats

