"""A multi-fidelity TPE model for BOHB's new configurations (`model="tpe"`; the default
`model="gp"` of BOHB and AsyncBOHB keeps everything here but the final choice of a proposal).

BOHB's paper model (`hpo.search.surrogates.kde`, `model="kde"`) fits a multivariate KDE on the largest
budget that has enough results. Early in a search that is budget 1 only, and later a
handful of points; measured on our multi-fidelity benchmarks it trailed Optuna's TPE with a
Hyperband pruner by 2-16x. This model learns from every result instead:

- **Ranking across budgets** (as Optuna ranks pruned trials): every configuration counts once,
  at the largest budget it reached; configurations are ordered by that budget (deeper is
  better: the schedule promoted it) and then by loss. The best `top_n_percent`, at most
  `max_good` (MAX_GOOD) of them, form l(x), the rest g(x) (past MAX_DENSITY_ROWS configs, of
  the rows `spread_over_ranking` keeps: l(x) is then the best max_good of those). Guards
  (`rungs="reliable"`, the default) keep a budget whose ranking misleads (a learning rate that
  wins after one epoch and loses after thirty) from filling l(x): a config in the worse half
  of the results at its deepest budget ranks after every config in the better half, however
  deep it got; and a budget is left out of the model (with every config whose deepest budget
  it is) where its ranking disagrees with the top budget's
  (`hpo.search.surrogates.rung_agreement`: Spearman's rho under RHO_MIN between the ranks the
  lower budget gives the top budget's configs, its own where they ran there and its nearest
  neighbours' otherwise, and their losses at the top), or where the configs promoted from it
  lose most pairings (AUC < 0.25) against configs that started on the budget above (left out
  where BOHB opens with a climbing bracket, whose configs climb every rung whatever they score
  and so give every budget its own-rank pairs with the top). `trusted_start` tells BOHB the
  same, and BOHB skips the brackets that would start new configs on such a budget.
  `rungs="deepest"` is the plain deeper-first ranking.
- **Univariate Parzen estimators per dimension** (Bergstra et al., NeurIPS 2011): each
  observation gets a truncated Gaussian whose width is the larger gap to its neighbours
  (clipped to [min_bandwidth, 1]), plus one uniform prior component, so every region
  keeps some density. Choices get smoothed category counts (add one).
- **Joint kernels where few budgets are trusted** (`kernels="auto"`, the default): where
  every budget below the top misleads, or, in a space without choices, where at most two
  of three or more budgets are trusted, BOHB runs (nearly) plain search on the top
  budgets, a (nearly) single-budget TPE. There each configuration is one
  product kernel over all its dimensions (`JointParzenEstimator`: the same widths; a choice
  keeps its category with weight 1 plus 1 / (n + 1) spread over all; an inactive dimension
  is uniform), so l(x) keeps which values went together. Elsewhere a config's values come
  from budgets that rank differently, and the per-dimension estimators recombine them.
  `kernels="joint"` or `"independent"` forces either.
- `num_samples` candidates are drawn from l(x) and the one maximising l(x)/g(x) is taken,
  scoring only the dimensions active in that candidate. With `batch="penalty"` (default
  "argmax": off; `AsyncBOHB` turns it on), while configs are pending (asynchronous workers), a
  share `batch_share` (0.5) of the proposals multiply l(x)/g(x) by a local penalty for
  closeness to each pending config (`_pending_penalty`, its length scale times `batch_scale`,
  3), so that many concurrent proposals do not crowd around one peak of a model that has not
  seen their results (BOHB's Gaussian process adds the same penalty to the log of its
  expected improvement, or takes Thompson draws where many configs are pending, `bohb_gp`).
  The settings and what they were measured against: benchmarks/notes/many_workers.md ("The
  pending penalty").
- Random configurations: the first `n_startup` (at least 10, and d + 2), and with
  `probe_budgets` (default) every new config that starts at a budget fewer than
  `n_startup` configs have reached (Hyperband's later brackets start higher): these
  probes are what shows a misleading lower budget up; where the space has choices, each
  probe is the draw (of 8) with the choices rarest at its budget, so a few probes cover
  every branch. Then a `random_fraction` (default 0: the prior component, which the cap on l(x) keeps
  at 1 / (max_good + 1) or more, already explores).
  The first `n_startup` random configurations are the rows of a Latin hypercube
  (`initial_design="latin"`, the default): each parameter's range is cut into n_startup
  equal slices with one config in each (of a conditional parameter, those of the rows
  where it is active), so a handful of configs covers every region of every parameter
  where uniform draws leave gaps and clusters; `"uniform"` draws them independently.
  Probes in a space with choices keep the rarest-choice rule above: on the branch
  problems it found the right branch more often than the hypercube's rows.
- User priors (`prior:` on a parameter): random configurations are drawn around them for a
  learnt share (`hpo.search.base.PriorTrust`), and once the model runs, a share fading as
  n_startup / n keeps drawing there.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Mapping

import numpy as np
from scipy.special import ndtr, ndtri

from hpo.search.base import (
    ConfigSampler,
    check_model_options,
    config_key,
    latin_hypercube,
    optional_count,
    spread_over_ranking,
    unseen_sample,
    win_rate,
    with_room,
)
from hpo.search.surrogates.kde import dimensions_of
from hpo.search.surrogates.rung_agreement import MAX_LOWER, MAX_UPPER, agreement, features
from hpo.space import SearchSpace

RUNG_MODES = ("reliable", "deepest")
KERNELS = ("auto", "joint", "independent")
BATCH_MODES = ("argmax", "penalty")
INITIAL_DESIGNS = ("latin", "uniform")
MIN_PAIRS = 3        # promoted and fresh configs on a budget before the budget below is judged
AUC_MIN = 0.25       # promoted configs winning fewer pairs than this: the budget below misleads
SPREAD_CANDIDATES = 8  # uniform draws a probe is picked from (the one with the rarest choices)
MIN_TOP_RESULTS = 6  # results a budget needs before the budgets below are judged against it
RHO_MIN = 0.6        # a budget whose ranking agrees less than this with the top budget's misleads
# The most configs l(x) holds (Optuna's TPE caps its good set at 25 too). Uncapped, l(x) grows
# with the search, and its prior component's weight and its kernels' width floor (both 1 / (n + 1))
# shrink with it, so a long search keeps the int level or the choice its first winners had: on a
# 4-parameter function (an int of 8 levels, a choice of 3), after 2,000 asks AsyncBOHB was within
# 0.1 of the optimum in 1 of 12 seeds uncapped and 12 of 12 capped at 25 (BOHB 5 and 12; caps of
# 50 and 100 escaped less often). On the published tuning set it binds past about 167 ranked
# configs: at 132 full-budget evaluations LCBench's regret moved by a factor of 1.013 (6 problems
# better, 6 worse), MFHartmann's not at all (benchmarks/notes/published_bohb.md, "l(x) in long searches").
MAX_GOOD = 25


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


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
        self._scale32 = self._scale.astype(np.float32)

    def log_pdf(self, x: np.ndarray) -> np.ndarray:
        # No max-subtraction is needed: the prior component (sigma 1) keeps every density
        # above ~0.35, and the narrowest kernel bounds it above, so exp cannot under- or overflow.
        # This is the hot loop of ask() (candidates x observations); float32 halves its cost.
        z = ((x[:, None] - self.mus[None, :]) * self._inverse_sigmas[None, :]).astype(np.float32)
        return np.log(np.exp(-0.5 * z * z) @ self._scale32).astype(float)

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


def _gap_sigmas(points: np.ndarray, min_bandwidth: float, n_kernels: int) -> np.ndarray:
    """Each point's width: the larger gap to its neighbours, where the outermost points count
    only their inner gap (a point near a bound is not widened by the empty stretch beyond it),
    clipped to [max(min_bandwidth, 1 / min(100, n_kernels + 1)), 1]."""
    n = len(points)
    if n == 0:
        return np.empty(0)
    order = np.argsort(points, kind="stable")
    ranked = points[order]
    padded = np.concatenate([[0.0], ranked, [1.0]])
    gaps = np.maximum(padded[1:-1] - padded[:-2], padded[2:] - padded[1:-1])
    if n >= 2:
        gaps[0], gaps[-1] = ranked[1] - ranked[0], ranked[-1] - ranked[-2]
    sigmas = np.empty(n)
    sigmas[order] = gaps
    return np.clip(sigmas, max(min_bandwidth, 1.0 / min(100, n_kernels + 1)), 1.0)


class JointParzenEstimator:
    """A mixture of product kernels on the unit cube: one per point, over all its dimensions
    at once (so l(x) keeps which values went together), plus a uniform-ish prior kernel.

    Numbers: truncated Gaussians with `_gap_sigmas` widths per dimension. Choices: the
    point's category with weight 1 plus 1 / (n + 1) spread over every category. A point
    where a dimension is inactive (NaN) is uniform there; a candidate's inactive
    dimensions are left out of its density."""

    def __init__(self, points: np.ndarray, dims, min_bandwidth: float):
        points = np.asarray(points, dtype=float).reshape(-1, len(dims))
        n = len(points)
        self.dims = dims
        self.n = n
        self.sigmas = np.ones((n + 1, len(dims)))           # last row: the prior kernel
        self.mus = np.full((n + 1, len(dims)), 0.5)
        self.mus[:n] = np.nan_to_num(points, nan=0.5)
        self.active = np.vstack([~np.isnan(points), np.zeros((1, len(dims)), bool)])   # the point's kernel there
        self._gaussian = self.active.copy()                  # and the prior kernel: Gaussian, the rest uniform
        self._gaussian[n] = True
        self._log_norm = np.zeros((n + 1, len(dims)))
        self._smooth = 1.0 / (n + 1)
        for j, dim in enumerate(dims):
            column = points[:, j]
            on = ~np.isnan(column)
            if dim.kind == "u":
                self.mus[:n, j] = np.where(on, dim.snap(np.nan_to_num(column, nan=0.0)), -1)
                self.mus[n, j] = -1
                continue
            self.sigmas[np.flatnonzero(on), j] = _gap_sigmas(column[on], min_bandwidth, int(on.sum()) + 1)
            # The prior kernel (mu 0.5, sigma 1) and each point's kernel, normalised on [0, 1].
            mu, sigma = self.mus[:, j], self.sigmas[:, j]
            mass = ndtr((1 - mu) / sigma) - ndtr(-mu / sigma)
            self._log_norm[:, j] = -np.log(math.sqrt(2 * math.pi) * sigma * mass)
        self._inverse_sigmas = 1.0 / self.sigmas
        self._numeric = np.array([j for j, dim in enumerate(dims) if dim.kind != "u"], dtype=int)
        self._ordinal = [j for j, dim in enumerate(dims) if dim.kind == "o"]
        self._unordered = [j for j, dim in enumerate(dims) if dim.kind == "u"]
        # -0.5 ((x - mu) / sigma)^2 + log norm = x^2 q + x l + c per kernel and numeric
        # dimension; all zero where the kernel is uniform (log density 0).
        gaussian = self._gaussian[:, self._numeric]
        precision = np.where(gaussian, self._inverse_sigmas[:, self._numeric] ** 2, 0.0)
        mus = self.mus[:, self._numeric]
        self._quadratic = (-0.5 * precision).T
        self._linear = (mus * precision).T
        self._constant = np.where(gaussian, -0.5 * mus * mus * precision + self._log_norm[:, self._numeric], 0.0).T

    def log_pdf(self, x: np.ndarray) -> np.ndarray:
        """log density at each row of x (m x d); NaN entries (inactive) are left out."""
        total = np.zeros((len(x), self.n + 1))
        numeric = self._numeric
        if numeric.size:
            columns = x[:, numeric].copy()
            for j in self._ordinal:                                   # evaluated at the level
                on = ~np.isnan(x[:, j])
                columns[on, numeric.searchsorted(j)] = self.dims[j].levels[self.dims[j].snap(x[on, j])]
            on = ~np.isnan(columns)
            columns = np.nan_to_num(columns)
            # The Gaussian exponents summed over dimensions, expanded into three matrix products
            # (the hot loop of ask(): candidates x kernels, without a third axis).
            total += (columns * columns) @ self._quadratic + columns @ self._linear + on @ self._constant
        for j in self._unordered:
            column = x[:, j]
            on = ~np.isnan(column)
            k = len(self.dims[j].levels)
            index = self.dims[j].snap(np.nan_to_num(column, nan=0.0))
            denominator = 1 + k * self._smooth
            term = np.where(index[:, None] == self.mus[None, :, j],
                            math.log((1 + self._smooth) / denominator), math.log(self._smooth / denominator))
            term = np.where(self.mus[None, :, j] < 0, -math.log(k), term)      # inactive there: uniform
            total += np.where(on[:, None], term, 0.0)
        peak = total.max(axis=1, keepdims=True)
        return peak[:, 0] + np.log(np.exp(total - peak).sum(axis=1)) - math.log(self.n + 1)

    def sample(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """m points (unit-cube values, ordinal and choice dimensions at their levels)."""
        kernel = rng.integers(0, self.n + 1, size=m)
        out = np.empty((m, len(self.dims)))
        for j, dim in enumerate(self.dims):
            if dim.kind == "u":
                k = len(dim.levels)
                own = self.mus[kernel, j].astype(int)
                keep = (own >= 0) & (rng.random(m) < 1.0 / (1 + k * self._smooth))
                out[:, j] = dim.levels[np.where(keep, own, rng.integers(0, k, size=m))]
                continue
            mu, sigma = self.mus[kernel, j], self.sigmas[kernel, j]
            uniform = ~self._gaussian[kernel, j]
            low, high = ndtr(-mu / sigma), ndtr((1 - mu) / sigma)
            u = np.clip(low + rng.random(m) * (high - low), 1e-12, 1 - 1e-12)
            x = np.where(uniform, rng.random(m), np.clip(mu + sigma * ndtri(u), 0.0, 1.0))
            out[:, j] = dim.levels[dim.snap(x)] if dim.kind == "o" else x
        return out


class _SplitModel:
    """l(x) and g(x): the points split by loss (the best `gamma` are good, at most `max_good` of
    them where it is set; past MAX_DENSITY_ROWS points, that many spread over their ranking,
    `spread_over_ranking`). `kernels`:
    "joint" (one product kernel per point, `JointParzenEstimator`) or "independent" (one
    estimator per dimension, each drawn from and scored on its own)."""

    def __init__(self, vectors: np.ndarray, losses: np.ndarray, gamma: float, dims, min_bandwidth: float,
                 kernels: str = "independent", max_good: int | None = None, last: "_SplitModel | None" = None):
        order = np.argsort(losses, kind="stable")
        order = order[spread_over_ranking(len(order))]      # bounded rows: a bounded ask
        n_good = max(1, int(math.ceil(gamma * len(order))))
        if max_good is not None:
            n_good = min(n_good, max_good)
        self.dims = dims
        self.kernels = kernels
        estimator = _joint if kernels == "joint" else _estimators
        self.good_points = vectors[order[:n_good]]
        # `last`, the same sampler's previous model: where l(x) holds the same points (capped,
        # most new results land in g(x)), its estimator is the same and is kept.
        if last is not None and last.kernels == kernels and last.good_points.shape == self.good_points.shape \
                and np.array_equal(last.good_points, self.good_points, equal_nan=True):
            self.good = last.good
        else:
            self.good = estimator(self.good_points, dims, min_bandwidth)
        self.bad = estimator(vectors[order[n_good:]], dims, min_bandwidth)

    def score(self, points: np.ndarray) -> np.ndarray:
        """log l(x) / g(x) per row; NaN (inactive) entries are left out."""
        if self.kernels == "joint":
            return self.good.log_pdf(points) - self.bad.log_pdf(points)
        return self.log_ratio(points).sum(axis=1)

    def sample_good(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """m draws from l(x) (unit-cube rows; ordinal and choice dimensions at their levels)."""
        if self.kernels == "joint":
            return self.good.sample(rng, m)
        out = np.empty((m, len(self.dims)))
        for j, dim in enumerate(self.dims):
            if dim.kind == "u":
                out[:, j] = dim.levels[self.good[j].sample(rng, m)]
            else:
                x = self.good[j].sample(rng, m)
                out[:, j] = dim.levels[dim.snap(x)] if dim.kind == "o" else x
        return out

    def log_ratio(self, points: np.ndarray) -> np.ndarray:
        """Per-dimension log l/g (m x d) of the independent estimators; NaN (inactive) entries give 0."""
        out = np.zeros(points.shape)
        for j, dim in enumerate(self.dims):
            column = points[:, j]
            active = ~np.isnan(column)
            if not active.any():
                continue
            x = column[active]
            if dim.kind == "u":
                x = dim.snap(x)
            out[active, j] = self.good[j].log_pdf(x) - self.bad[j].log_pdf(x)
        return out


def _joint(part: np.ndarray, dims, min_bandwidth: float) -> "JointParzenEstimator":
    return JointParzenEstimator(part, dims, min_bandwidth)


def _estimators(part: np.ndarray, dims, min_bandwidth: float) -> list:
    per_dim = []
    for j, dim in enumerate(dims):
        column = part[:, j]
        column = column[~np.isnan(column)]        # inactive conditionals say nothing here
        if dim.kind == "u":
            per_dim.append(CategoryEstimator(dim.snap(column) if column.size else np.empty(0, int), len(dim.levels)))
        else:
            per_dim.append(ParzenEstimator(column, min_bandwidth))
    return per_dim


class MultiFidelityTPESampler(ConfigSampler):
    judges_budgets = True       # rung agreement (`_reliability`) decides which budgets are trusted

    def __init__(self, space: SearchSpace, *, top_n_percent: float = 15, num_samples: int = 64,
                 random_fraction: float = 0.0, min_bandwidth: float = 0.01, n_startup: int | None = None,
                 rungs: str = "reliable", probe_budgets: bool = True, kernels: str = "auto",
                 initial_design: str = "latin", batch: str = "argmax", batch_scale: float = 3.0,
                 batch_share: float = 0.5, max_good: int | None = MAX_GOOD):
        super().__init__(space)
        if batch not in BATCH_MODES:
            raise ValueError(f"batch must be one of {list(BATCH_MODES)}, got {batch!r}")
        if not (_real(batch_scale) and 0 < batch_scale < math.inf):
            raise ValueError(f"batch_scale must be a finite number above 0, got {batch_scale!r}")
        if not (_real(batch_share) and 0 < batch_share <= 1):
            raise ValueError(f"batch_share must be a number above 0 and at most 1, got {batch_share!r}")
        self.batch = batch
        self.batch_scale = float(batch_scale)
        self.batch_share = float(batch_share)
        check_model_options(top_n_percent, random_fraction, num_samples)
        if rungs not in RUNG_MODES:
            raise ValueError(f"rungs must be one of {list(RUNG_MODES)}, got {rungs!r}")
        self.top_n_percent = top_n_percent
        self.max_good = optional_count("max_good", max_good, least=1)
        self.num_samples = num_samples
        self.random_fraction = random_fraction
        self.min_bandwidth = min_bandwidth
        self.n_startup = optional_count("n_startup", n_startup, least=1) or max(10, len(space) + 2)
        if kernels not in KERNELS:
            raise ValueError(f"kernels must be one of {list(KERNELS)}, got {kernels!r}")
        self.kernels = kernels
        if initial_design not in INITIAL_DESIGNS:
            raise ValueError(f"initial_design must be one of {list(INITIAL_DESIGNS)}, got {initial_design!r}")
        self.initial_design = initial_design
        self._design: list[np.ndarray] | None = None        # rows of the initial design not handed out yet
        self.rungs = rungs
        self.probe_budgets = probe_budgets
        self.dims = dimensions_of(space)
        self._conditional = any(p.when for p in space)
        self._conditional_dims = [bool(p.when) for p in space]
        self.deepest: dict[str, tuple[float, float, np.ndarray]] = {}   # config -> (budget, loss, unit vector)
        # budget -> config -> (loss, the budget it was promoted from or NaN)
        self.by_budget: dict[float, dict[str, tuple[float, float]]] = {}
        self.rung_trusted: dict[float, float] = {}                      # budget -> trusted (1) or not (0)
        self._model: tuple[tuple, _SplitModel] | None = None          # (data key, model)
        self._rows: dict[str, int] = {}                     # config -> row of _table
        self._table = np.empty((0, 2 + len(self.dims)))     # rows: deepest budget, its loss, unit vector
        self._reached: dict[float, int] = {}                # budget -> configs whose deepest it is
        # budget -> (loss, promoted-from budget) rows in the order of by_budget[budget], grown in
        # place, and each config's row there (`_results`: ask() must not rebuild them from dicts)
        self._result_table: dict[float, np.ndarray] = {}
        self._result_rows: dict[float, dict[str, int]] = {}
        self._result_configs: dict[float, np.ndarray] = {}   # budget -> each result's row of _table, likewise
        self._result_unmodelled: dict[float, np.ndarray] = {}   # budget -> each result's config not drawn there
        self._features: dict[float, tuple] = {}             # budget -> (`features`, unmodelled mask), likewise
        self._medians: dict[float, float] = {}              # budget -> median loss of its results, likewise
        self._agreements: dict[tuple, tuple] = {}           # (budget, top) -> (result counts, inputs, rho)
        self._modelled: dict[str, float] = {}               # config drawn by the model -> the budget it started at
        self._failed: dict[str, np.ndarray] = {}            # config that failed (at any budget) -> unit vector
        self.rung_agreement: dict[float, float] = {}        # budget -> Spearman's rho with the top budget
        self._trust: tuple[tuple, dict[float, float]] | None = None   # (data key, reliability)
        # Set when BOHB opens with a climbing bracket (`open_with_climb`): its configs give
        # every budget pairs with the top (own ranks), and the promoted-against-fresh check is
        # left out for the whole search (see `_reliability`).
        self.climbing = False

    def observe(self, config: Mapping[str, Any], budget: float, loss: float) -> None:
        key = config_key(config)
        known = self.deepest.get(key)
        # Before any state changes: a config the space refuses leaves every table as it was.
        vector = known[2] if known is not None else self.space.to_unit(config)
        promoted_from = known[0] if known is not None and known[0] < budget else math.nan
        self.by_budget.setdefault(budget, {})[key] = (loss, promoted_from)
        rows = self._result_rows.setdefault(budget, {})
        row = rows.setdefault(key, len(rows))      # a config told again keeps its place, as in the dict
        table = self._result_table[budget] = with_room(self._result_table.get(budget, np.empty((0, 2))), row + 1)
        table[row] = (loss, promoted_from)
        self._features.pop(budget, None)
        self._medians.pop(budget, None)
        if known is None or budget >= known[0]:
            self.deepest[key] = (budget, loss, vector)
            # The same facts as arrays, updated in place: ask() must not rebuild them from dicts.
            table_row = self._rows.setdefault(key, len(self._rows))
            self._table = with_room(self._table, table_row + 1)
            self._table[table_row, :2] = (budget, loss)
            self._table[table_row, 2:] = vector
            if known is not None:
                self._reached[known[0]] -= 1
            self._reached[budget] = self._reached.get(budget, 0) + 1
        configs = self._result_configs[budget] = with_room(
            self._result_configs.get(budget, np.empty(0, dtype=np.intp)), row + 1)
        unmodelled = self._result_unmodelled[budget] = with_room(
            self._result_unmodelled.get(budget, np.empty(0, dtype=bool)), row + 1)
        configs[row] = self._rows[key]
        unmodelled[row] = self._modelled.get(key) != budget     # a config is drawn before its first result

    def observe_failure(self, config: Mapping[str, Any], budget: float) -> None:
        """A failed config ranks after every other in the model (`_fit`, and the Gaussian
        process's rows): l(x) never holds it and g(x) always does. It stays out of the
        per-budget results, which the rung agreement and the probes count."""
        key = config_key(config)
        if key not in self._failed:
            known = self.deepest.get(key)
            self._failed[key] = known[2] if known is not None else self.space.to_unit(config)

    def _data_key(self) -> tuple:
        """What the models are fitted on: the results per budget and the failures."""
        return tuple((b, len(obs)) for b, obs in sorted(self.by_budget.items())) + (len(self._failed),)

    def _failures(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows of `_table` whose config also failed, the unit vectors of every failed config)."""
        rows = np.array([self._rows[key] for key in self._failed if key in self._rows], dtype=int)
        vectors = np.array(list(self._failed.values()), dtype=float).reshape(-1, len(self.dims))
        return rows, vectors

    def stats(self) -> dict[str, float]:
        budgets = [b for b, _, _ in self.deepest.values()]
        stats = {"model_observations": float(len(budgets)), "model_budget": float(max(budgets)) if budgets else -1.0}
        for budget, weight in self.rung_trusted.items():
            stats[f"rung_trusted/{budget:g}"] = weight
        for budget, rho in self.rung_agreement.items():
            stats[f"rung_agreement/{budget:g}"] = rho
        return stats

    def propose(self, rng: np.random.Generator, budget: float, pending: list[Mapping[str, Any]]) -> dict[str, Any]:
        # Always draw the coin, so the random stream does not depend on whether a model exists.
        use_random = rng.random() < self.random_fraction
        config = None
        # Probes: until n_startup configs reached the budget this one starts at, it is random.
        # Configs that start high are what tells a misleading lower budget apart (see
        # `_reliability`), and a model fitted on that budget's winners would only echo them.
        floor = budget if self.probe_budgets else -math.inf
        usable = sum(n for b, n in self._reached.items() if b >= floor)
        if not use_random and usable >= self.n_startup:
            # Priors keep a share that fades as results pile up (the model has learnt from
            # the prior-drawn configs by then), and shrinks faster when they lose.
            if self.priors.enabled and rng.random() < self.priors.share * self.n_startup / len(self.deepest):
                config = self.prior_draw(rng, pending)
            else:
                config = self._best_candidate(rng, pending)
                if config is not None:
                    self._modelled[config_key(config)] = budget
        if config is None:
            # A probe (lower budgets have results to check against): spread over the choices.
            probe = not use_random and any(b < floor for b in self._reached)
            config = self._spread(rng, pending, floor) if probe else self._fresh_random(rng, pending)
        self.seen.add(config_key(config))
        return config

    def _spread(self, rng: np.random.Generator, pending, floor: float) -> dict[str, Any]:
        """A random config for a probe. Where the space has choices: of
        SPREAD_CANDIDATES uniform draws, the one whose choices are the rarest among the
        configs that reached `floor` and the pending ones, so that a handful of probes covers every branch rather
        than what chance gives. Numbers stay uniform (a farthest-point rule would
        push them to the bounds)."""
        unordered = np.array([dim.kind == "u" for dim in self.dims])
        if self.priors.enabled or not unordered.any():
            return self._fresh_random(rng, pending)
        candidates = [unseen_sample(self.space, rng, self.seen, pending) for _ in range(SPREAD_CANDIDATES)]
        table = self._table[:len(self._rows)]
        reached = table[table[:, 0] >= floor][:, 2:]
        if pending:        # probes asked together (a bracket's rung) spread among themselves too
            reached = np.vstack([reached, [self.space.to_unit(c) for c in pending]])
        reached = reached[:, unordered]
        if not len(reached):
            return candidates[0]
        points = np.array([self.space.to_unit(c) for c in candidates])[:, unordered]
        # How often each candidate's choices (inactive counts as a value of its own) occur
        # among those configs: the rarest combination wins.
        same = np.isclose(points[:, None, :], reached[None, :, :]) | (
            np.isnan(points)[:, None, :] & np.isnan(reached)[None, :, :])
        return candidates[int(np.argmin(same.mean(axis=1).sum(axis=1)))]

    # --- the model ------------------------------------------------------------------------
    def _fit(self) -> "_SplitModel":
        """l(x) and g(x) from the ranking, failed configs last, refitted only when a result
        or a failure arrived."""
        key = self._data_key()
        if self._model is not None and self._model[0] == key:
            return self._model[1]
        gamma = self.top_n_percent / 100
        table = self._table[:len(self._rows)]
        budgets, losses, vectors = table[:, 0], table[:, 1], table[:, 2:]
        losses = self.split_losses(budgets, losses)
        if self.rungs == "reliable":
            order = self._ranked_reliable(budgets, losses)
        else:
            order = np.lexsort((losses, -budgets))           # deeper first, then by loss
        # Losses in ranked order make the split take the first `gamma` of the ranking as good.
        kernels = self.kernels
        if kernels == "auto":
            kernels = "joint" if self._joint_kernels_apply(budgets[order]) else "independent"
        ranked = vectors[order]
        if self._failed:
            failed_rows, failed = self._failures()
            succeeded = order[~np.isin(order, failed_rows)]
            ranked = np.concatenate([vectors[succeeded], failed])
        model = _SplitModel(ranked, np.arange(len(ranked), dtype=float), gamma, self.dims, self.min_bandwidth,
                            kernels, self.max_good, last=self._model[1] if self._model is not None else None)
        self._model = (key, model)
        return model

    def _joint_kernels_apply(self, kept: np.ndarray) -> bool:
        """Whether `kernels="auto"` takes joint kernels, given the budgets of the configs the
        model keeps: where those are all one budget's (every other budget misleads), or, in
        a space without choices and with `rungs="reliable"`, where at most two of three or
        more budgets are trusted (`_reliability`). BOHB then skips the brackets starting on
        the other budgets and runs (nearly) plain search on the top ones, a (nearly)
        single-budget TPE, where joint kernels keep which values went together. Where more
        budgets are trusted, a config's values come from budgets that rank differently, and
        per-dimension estimators recombine them; with choices, a joint kernel holds its
        category harder than the category counts do. The measurements behind both limits
        are in benchmarks/notes/synthetic_suite.md, "Why joint kernels where two budgets are trusted"."""
        if len(self.by_budget) < 2:
            return False
        if np.all(kept == kept[0]):
            return True
        if self.rungs != "reliable" or any(dim.kind == "u" for dim in self.dims):
            return False
        trusted = sum(1 for trust in self._reliability().values() if trust > 0)
        return trusted <= 2 < len(self.by_budget)

    def split_losses(self, budgets: np.ndarray, losses: np.ndarray) -> np.ndarray:
        """The losses good and bad are split by (one per config, at its deepest budget): the
        told ones here; the multi-objective model (`hpo.search.multiobjective.pareto_tpe`) ranks points instead."""
        return losses

    def _reliability(self) -> dict[float, float]:
        """Per budget, 1 if its ranking can be trusted, else 0; recomputed only when a result arrived.

        Two checks. (1) Rank agreement: the budgets below the top one (the largest with
        MIN_TOP_RESULTS results) are judged against it (`hpo.search.surrogates.rung_agreement`): a budget
        whose ranking agrees with the top's by a Spearman's rho under RHO_MIN is not trusted.
        Each is judged on its own, not through the budgets between: a noisy middle budget
        does not condemn a good lower one. (2) Promoted against fresh: a budget's winners
        are the configs promoted from it; at the next budget up they compete with configs
        that started there. If they lose to those in more than 1 - AUC_MIN of the pairs,
        the lower budget's ranking points the wrong way, and so does every budget below it
        (the chain of promotions went through it). Needs MIN_PAIRS of each kind. Left out
        where BOHB opens with a climbing bracket (`climbing`), for the whole search: the
        climbers' results give the rung agreement own-rank pairs at every budget, and later
        the check misfires where budgets agree, since fresh configs drawn by a model that
        has learnt since beat older promoted ones."""
        key = tuple((b, len(obs)) for b, obs in sorted(self.by_budget.items()))
        if self._trust is not None and self._trust[0] == key:
            return self._trust[1]
        budgets = sorted(self.by_budget)
        reliability = {b: 1.0 for b in budgets}
        trust = 1.0
        for lower, upper in zip(reversed(budgets[:-1]), reversed(budgets[1:])):
            results = self._results(upper)
            promoted = results[:, 1] == lower
            if not self.climbing and promoted.sum() >= MIN_PAIRS and (~promoted).sum() >= MIN_PAIRS:
                auc = win_rate(results[promoted, 0], results[~promoted, 0])     # P(a promoted config wins)
                trust *= 0.0 if auc < AUC_MIN else 1.0
            reliability[lower] = trust
        # The top budget's side: its configs that the model did not draw there (random probes,
        # promoted ones). The model's own draws cluster where it already believes the optimum
        # is, and inside such a cluster the budgets agree on the parameters that do not move,
        # whatever the lower budget says about the region: a reversal seen once would look
        # healed, and the misleading brackets would come back.
        judges = {b: self._unmodelled(b) for b in budgets}
        judged = [b for b in budgets if judges[b].sum() >= MIN_TOP_RESULTS]
        self.rung_agreement = {}
        if judged:
            top = max(judged)
            upper = (self._features_at(top)[judges[top]], self._results(top)[-MAX_LOWER:, 0][judges[top]])
            for budget in budgets:
                if budget < top:
                    # Recomputed when the top has a new result, and when the lower budget has
                    # grown by a sixteenth: one more result among hundreds changes little.
                    n = len(self.by_budget[budget])
                    rho = self._agreement(budget, top, (n - n % max(1, n // 16), len(self.by_budget[top])), upper)
                    self.rung_agreement[budget] = rho
                    if rho < RHO_MIN:
                        reliability[budget] = 0.0
        self._trust = (key, reliability)
        self.rung_trusted = reliability
        return reliability

    def _agreement(self, budget: float, top: float, counts: tuple, upper: tuple) -> float:
        """The rung agreement of `budget` with `top`, computed again when `counts` changed and
        the inputs did too: a result at the top that the model drew there changes the counts
        and leaves the judges, and so the rho, as they were."""
        known = self._agreements.get((budget, top))
        if known is not None and known[0] == counts:
            return known[2]
        lower = (self._features_at(budget)[-MAX_LOWER:], self._results(budget)[-MAX_LOWER:, 0])
        inputs = (*lower, upper[0][-MAX_UPPER:], upper[1][-MAX_UPPER:])
        if known is not None and all(np.array_equal(a, b) for a, b in zip(known[1], inputs)):
            rho = known[2]
        else:
            rho = agreement(lower, upper)
        self._agreements[(budget, top)] = (counts, tuple(np.array(a) for a in inputs), rho)
        return rho

    def open_with_climb(self) -> None:
        self.climbing = True

    def trusted_start(self, budget: float) -> bool:
        """Whether new configs may start at `budget`: its ranking is trusted (see
        `_reliability`). BOHB skips the brackets that start on an untrusted budget, so the
        budget goes where the ranking is right (down to plain model-based search at the
        full budget where every lower budget misleads)."""
        if self.rungs != "reliable":
            return True
        return self._reliability().get(budget, 1.0) > 0

    def _unmodelled(self, budget: float) -> np.ndarray:
        """Mask over the last MAX_LOWER results at `budget`: configs the model did not draw there
        (a config is drawn before its result arrives, so the mask is cached like the features)."""
        self._features_at(budget)
        return self._features[budget][1]

    def _features_at(self, budget: float) -> np.ndarray:
        """`rung_agreement.features` of the last MAX_LOWER configs with a result at `budget`,
        in the order of _results(budget)."""
        if budget not in self._features:
            n = len(self.by_budget[budget])
            vectors = self._table[self._result_table_rows(budget)[-MAX_LOWER:], 2:]
            unmodelled = self._result_unmodelled[budget][:n][-MAX_LOWER:].copy()
            self._features[budget] = (features(vectors, self.dims, self._conditional_dims), unmodelled)
        return self._features[budget][0]

    def _results(self, budget: float) -> np.ndarray:
        """(n, 2): loss and promoted-from budget (NaN: started here) of every result at `budget`."""
        return self._result_table[budget][:len(self.by_budget[budget])]

    def _result_table_rows(self, budget: float) -> np.ndarray:
        """The row of `_table` (the config) of every result at `budget`, in `_results`' order."""
        return self._result_configs[budget][:len(self.by_budget[budget])]

    def _ranked_reliable(self, budgets: np.ndarray, losses: np.ndarray) -> np.ndarray:
        """Indices of the configs (at their deepest budget) in rank order, deeper first and
        then by loss, with two guards against budgets whose ranking misleads: configs whose
        deepest budget is unreliable (see `_reliability`) are left out, and a config in the
        worse half of its deepest budget's results ranks after every config in a better half,
        however deep it got."""
        reliability = self._reliability()
        worse = self._worse_half(budgets, losses)
        order = np.lexsort((losses, -budgets, worse))
        untrusted = [b for b, trust in reliability.items() if trust <= 0]
        kept = order[~np.isin(budgets[order], untrusted)] if untrusted else order
        return kept if kept.size else order

    def _worse_half(self, budgets: np.ndarray, losses: np.ndarray) -> np.ndarray:
        """Per config, whether it is in the worse half of all the results at its deepest budget."""
        levels = np.array(sorted(self.by_budget))        # every config's deepest budget is one of them
        for b in self.by_budget:                          # most budgets have no new result since the last ask
            if b not in self._medians:
                self._medians[b] = np.median(self._results(b)[:, 0])
        medians = np.array([self._medians[b] for b in levels])
        return losses > medians[np.searchsorted(levels, budgets)]

    def _best_candidate(self, rng: np.random.Generator, pending) -> dict[str, Any] | None:
        model = self._fit()
        penalised = self._keeps_away(rng, pending)
        drawn = self._sample_good(rng, model, self.num_samples)
        # In a conditional space each candidate is scored as its config encodes it: an
        # inactive value says nothing.
        candidates = self.space.units_round_trip(drawn) if self._conditional else drawn
        total = model.score(candidates)
        taken = self.taken(pending)
        if penalised:
            total = total + self._pending_penalty(model.good_points, candidates, pending)
        for index in np.argsort(-total, kind="stable"):
            config = self.space.from_unit(drawn[index])
            if config_key(config) not in taken:
                return config
        return None

    def _keeps_away(self, rng: np.random.Generator, pending) -> bool:
        """Whether this proposal keeps away from the pending configs (`batch="penalty"`): a
        share `batch_share` of the proposals made while configs are pending. The coin is drawn
        only then, from the searcher's one stream: a search that never has a job pending (one
        worker) asks exactly as with "argmax"; once one was tossed, later asks differ, pending
        or not."""
        if not pending or self.batch != "penalty":
            return False
        return self.batch_share >= 1.0 or rng.random() < self.batch_share

    def _pending_penalty(self, good_points: np.ndarray, candidates: np.ndarray, pending) -> np.ndarray:
        """Local penalisation (after Gonzalez et al., AISTATS 2016) of each candidate's log l/g
        (or log expected improvement, `bohb_gp`):
        log prod_p (1 - exp(-r_p^2 / 2)), r_p its distance to pending config p with each number
        dimension scaled by batch_scale times Scott's bandwidth for p + 1 points spread like
        l(x)'s configs (`good_points`: 1.06 * their std * (p + 1)^(-1 / (d + 4)), at least
        min_bandwidth); a choice that differs, or a dimension active in only one of the two,
        counts as far."""
        running = np.array([self.space.to_unit(c) for c in pending], dtype=float).reshape(-1, len(self.dims))
        shrink = (len(pending) + 1) ** (-1.0 / (len(self.dims) + 4))
        r2 = np.zeros((len(candidates), len(running)))
        for j, dim in enumerate(self.dims):
            a, b = candidates[:, j][:, None], running[:, j][None, :]
            on = ~np.isnan(a) & ~np.isnan(b)
            if dim.kind == "u":
                r2 += np.where(on & (np.abs(a - b) > 1e-9), np.inf, 0.0)
            else:
                column = good_points[:, j]
                column = column[~np.isnan(column)]
                spread = float(np.std(column)) if column.size > 1 else 0.25
                scale = max(self.min_bandwidth, self.batch_scale * 1.06 * spread * shrink)
                r2 += np.where(on, ((np.nan_to_num(a) - np.nan_to_num(b)) / scale) ** 2, 0.0)
            r2 += np.where(np.isnan(a) != np.isnan(b), np.inf, 0.0)
        return np.log(np.maximum(-np.expm1(-0.5 * r2), 1e-300)).sum(axis=1)

    def _sample_good(self, rng: np.random.Generator, model: _SplitModel, m: int) -> np.ndarray:
        return model.sample_good(rng, m)

    def _fresh_random(self, rng: np.random.Generator, pending) -> dict[str, Any]:
        """A model-free config: with `initial_design="latin"` and no priors, the next unseen row
        of a Latin hypercube of n_startup rows (drawn at first use); after those, and otherwise,
        `fresh` (uniform, or around the priors for their share: a design that ignored them
        would make a wrong prior cost more)."""
        if self.initial_design == "latin" and not self.priors.enabled:
            if self._design is None:
                self._design = list(latin_hypercube(rng, self.n_startup, len(self.dims)))
            taken = self.taken(pending)
            while self._design:
                config = self.space.from_unit(self._design.pop(0))
                if config_key(config) not in taken:
                    return config
        return self.fresh(rng, pending)
