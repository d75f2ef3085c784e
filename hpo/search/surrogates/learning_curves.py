"""Learning-curve extrapolation for the freeze-thaw searcher (`hpo.search.freeze_thaw`).

A curve is a loss observed at a few budgets (epochs). It is modelled as a power law,
y(b) = a + c * b^(-alpha), the family DPL ensembles (Kadra et al., NeurIPS 2023, "Scaling
Laws for Hyperparameter Optimization"), fitted per curve here rather than through a shared
network. For a fixed alpha the model is linear in (a, c), so each member of the ensemble
is a closed-form least-squares fit: `ALPHAS` spans the decay exponents, each member is
weighted by its likelihood under the noise the best member leaves, and the members'
extrapolations give a mean and a spread. No optimiser runs in the searcher's loop.

A power law extrapolated from a few epochs is biased and overconfident, so
`Calibration` learns, for each budget of the searcher's schedule, how much of the
improvement promised from there came true at the full budget over the curves that got
there, and how far off it was, starting from a prior that believes half of it, with an
error that shrinks with the log distance to the full budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import ndtr

# The ensemble's decay exponents: from nearly logarithmic decay (0.05) to a curve that is
# flat after a few epochs (4). DPL's fitted exponents on LCBench fall inside this range.
ALPHAS = np.geomspace(0.05, 4.0, 20)
EXTRAPOLATION_RANGE = 2.0   # a member may predict at most this many observed ranges beyond the curve
PRIOR_WEIGHT = 2.0          # pseudo-curves the calibration prior counts as
PRIOR_TRUST = 0.5           # the share of an extrapolated improvement believed before any curve is complete
MAX_TRUST = 2.0


@dataclass(frozen=True)
class PowerLaw:
    """y(b) = a + c * b^(-alpha)."""

    a: float
    c: float
    alpha: float

    def __call__(self, budget) -> np.ndarray:
        return self.a + self.c * np.asarray(budget, dtype=float) ** -self.alpha


@dataclass(frozen=True)
class Extrapolation:
    """The ensemble's prediction at the target budget: mean and spread (members and noise)."""

    mean: float
    std: float


def _members(budgets: np.ndarray, values: np.ndarray, alphas: np.ndarray):
    """Per alpha: (a, c, sum of squared residuals) of the least-squares fit."""
    z = budgets[None, :] ** -alphas[:, None]                     # members x points
    n = len(budgets)
    sz, szz = z.sum(axis=1), (z * z).sum(axis=1)
    sy, szy = values.sum(), z @ values
    det = n * szz - sz * sz
    flat = np.abs(det) < 1e-12 * max(1.0, n * n)                  # one distinct budget: a constant
    safe = np.where(flat, 1.0, det)
    c = np.where(flat, 0.0, (n * szy - sz * sy) / safe)
    a = np.where(flat, sy / n, (sy - c * sz) / n)
    residual = values[None, :] - a[:, None] - c[:, None] * z
    return a, c, (residual * residual).sum(axis=1)


def fit_power_law(budgets, values) -> PowerLaw:
    """The least-squares power law through (budgets, values): the best member of the
    ensemble, refined over log(alpha) by a bounded scalar search. Needs three or more
    distinct budgets to pin alpha down."""
    budgets, values = np.asarray(budgets, dtype=float), np.asarray(values, dtype=float)
    a, c, sse = _members(budgets, values, ALPHAS)
    best = int(np.argmin(sse))
    logs = np.log(ALPHAS)
    low, high = logs[max(best - 1, 0)], logs[min(best + 1, len(logs) - 1)]

    def profile(log_alpha: float) -> float:
        return float(_members(budgets, values, np.array([math.exp(log_alpha)]))[2][0])

    log_alpha = minimize_scalar(profile, bounds=(low, high), method="bounded",
                                options={"xatol": 1e-4}).x if high > low else logs[best]
    alpha = math.exp(log_alpha)
    a, c, _ = _members(budgets, values, np.array([alpha]))
    return PowerLaw(a=float(a[0]), c=float(c[0]), alpha=alpha)


def extrapolate(budgets, values, target: float) -> Extrapolation:
    """The ensemble's prediction of the loss at `target` from a curve observed at `budgets`.
    One point: the point itself, with no spread (the calibration supplies it). Two: every
    member passes through both, equally likely. Three or more: members weighted by their
    likelihood, with the noise variance the best member leaves (floored)."""
    budgets, values = np.asarray(budgets, dtype=float), np.asarray(values, dtype=float)
    if len(values) == 1:
        return Extrapolation(float(values[0]), 0.0)
    a, c, sse = _members(budgets, values, ALPHAS)
    span = float(values.max() - values.min())
    predictions = np.clip(a + c * target ** -ALPHAS, values.min() - EXTRAPOLATION_RANGE * span,
                          values.max() + EXTRAPOLATION_RANGE * span)
    n = len(values)
    noise = 0.0
    if n > 2:
        noise = max(float(sse.min()) / (n - 2), (1e-3 * span) ** 2, 1e-12)
        weights = np.exp(-(sse - sse.min()) / (2 * noise))
    else:
        weights = np.ones(len(ALPHAS))
    weights /= weights.sum()
    mean = float(weights @ predictions)
    spread = float(weights @ (predictions - mean) ** 2)
    return Extrapolation(mean, math.sqrt(spread + noise))


def expected_improvement(mean: np.ndarray, std: np.ndarray, incumbent: float) -> np.ndarray:
    """E[max(incumbent - Y, 0)] for Y ~ N(mean, std^2), elementwise (losses: lower is better)."""
    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    gain = incumbent - mean
    safe = np.where(std > 0, std, 1.0)
    z = gain / safe
    smooth = gain * ndtr(z) + safe * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return np.where(std > 0, smooth, np.maximum(gain, 0.0))


class Calibration:
    """How much of the improvement an extrapolation promises is real, learnt per step of a
    schedule from the curves that went on from there. At a step, a curve's last loss is y
    and its extrapolation to the full budget promises the change d (negative: better); the
    loss observed there later is y + e (a curve that stopped short of the full budget
    counts with d and e scaled up, see `FreezeThaw._calibrate`). Per step, e = shift +
    trust * d + noise is fitted over those curves, pooled with PRIOR_WEIGHT pseudo-curves
    saying shift = 0 and trust = PRIOR_TRUST (a power law from a few epochs over-promises),
    with noise of spread `scale` times the share of the log budget left. The shift is what
    a curve of one point (no trend to extrapolate) still has to gain. A lineage's prediction
    is y + shift + trust * d, with the posterior root mean square residual as its
    uncertainty."""

    def __init__(self, steps: list[float]):
        self.steps = list(steps)
        n = len(steps)
        self._sums = {name: np.zeros(n) for name in ("n", "d", "e", "dd", "de", "ee")}
        # How much of the schedule (in log budget) is left after each step: 1 at the first, 0 at the end.
        top, bottom = math.log(steps[-1]), math.log(steps[0])
        self.remaining = np.array([(top - math.log(b)) / (top - bottom) if top > bottom else 0.0 for b in steps])
        self._fitted: tuple[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def add(self, step: int, promised: float, observed: float) -> None:
        """At `step` the extrapolation promised the change `promised`; `observed` came true."""
        for name, value in (("n", 1.0), ("d", promised), ("e", observed), ("dd", promised * promised),
                            ("de", promised * observed), ("ee", observed * observed)):
            self._sums[name][step] += value
        self._fitted = None

    def fit(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per step: shift, trust, and the residual sum of squares, by ridge regression
        towards the prior."""
        if self._fitted is None:
            s = self._sums
            w = PRIOR_WEIGHT
            # The trust's pull is that of PRIOR_WEIGHT curves spread as the promised changes are.
            count = np.maximum(s["n"], 1)
            scale = np.where(s["n"] > 1, np.maximum(s["dd"] / count - (s["d"] / count) ** 2, 1e-12), 1.0)
            # Normal equations of [n + w, sum d; sum d, sum dd + w scale] [shift, trust] = [sum e, sum de + w scale t0].
            a, b, c = s["n"] + w, s["d"], s["dd"] + w * scale
            r1, r2 = s["e"], s["de"] + w * scale * PRIOR_TRUST
            trust = np.clip((a * r2 - b * r1) / (a * c - b * b), 0.0, MAX_TRUST)
            shift = (r1 - b * trust) / a            # the shift that goes with the (clipped) trust
            residual = (s["ee"] - 2 * shift * s["e"] - 2 * trust * s["de"] + s["n"] * shift ** 2
                        + 2 * shift * trust * s["d"] + trust ** 2 * s["dd"])
            self._fitted = (shift, trust, np.maximum(residual, 0.0))
        return self._fitted

    def shift(self) -> np.ndarray:
        return self.fit()[0]

    def trust(self) -> np.ndarray:
        """Per step: the share of the promised change that comes true."""
        return self.fit()[1]

    def std(self, scale: float) -> np.ndarray:
        """Per step; `scale` is the prior's spread at the first step (how far configs differ there)."""
        prior = (scale * self.remaining) ** 2
        return np.sqrt((PRIOR_WEIGHT * prior + self.fit()[2]) / (self._sums["n"] + PRIOR_WEIGHT))
