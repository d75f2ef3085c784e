"""A learning-curve ("freeze-thaw") searcher: Swersky, Snoek and Adams, "Freeze-Thaw Bayesian
Optimization" (2014), with the power-law curves of DPL (Kadra et al., NeurIPS 2023).

Every configuration is a lineage of jobs: it starts at `min_budget` and is paused
("frozen") after each step; a later job may continue it from its checkpoint ("thaw") by one
step. At each ask the searcher either continues one paused lineage or starts a new
configuration, whichever has the larger expected improvement at `max_budget` per epoch
still to spend to get there:

- a paused lineage's loss at `max_budget` is extrapolated from its curve (every epoch's
  value where the runner reports them, `TrialResult.curve`; else its value at each step)
  by an ensemble of power laws, then corrected and widened by a calibration learnt from
  every lineage that went on from a step (`hpo.search.learning_curves.Calibration`: how
  much of the promised improvement came true, and how far off it was); its score is
  EI / (max_budget - budget reached);
- a new configuration's loss at `max_budget` is predicted as the lineages' were after
  their first step, so its score is the mean of their EI there (failures counting as no
  improvement) / max_budget. The configuration itself comes from a TPE split of the
  lineages by predicted final loss (`hpo.search.tpe`'s estimators), after `n_startup`
  Latin-hypercube configs.

The incumbent is observed, never predicted: the best loss at `max_budget`, or, before any
lineage got there, the best loss seen at any budget.

Steps: the budgets from `min_budget` to `max_budget` grow geometrically by about `growth`
(default `eta`, whole epochs where both ends are whole: 1, 3, 9, 27 for 1..27 with eta 3;
2, 6, 17, 52 for LCBench's 52/27..52). Every job carries a fixed cost (starting, restoring
a checkpoint, building the graph), so a lineage should take few jobs: log_eta(max/min) of
them, as many as a Hyperband promotion chain. The per-epoch curve is what the model fits;
the steps only set how often it decides. Finer steps did worse on LCBench's tuning tasks:
with growth 2 the first step is two epochs, its two-point curves extrapolate wildly, and
most of the budget went to taking new configs from 2 to 4 epochs.

Until `climbers` lineages (default 1) reached `max_budget`, the deepest paused lineage
continues whatever its expected improvement: the calibration needs complete curves, and
the incumbent a full-budget result.

One objective, no constraints: with several the expected improvement is not defined, and
`objectives` or `constraints` raise a ValueError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpo.search.base import Searcher, config_key, latin_hypercube
from hpo.search.kde import dimensions_of
from hpo.search.learning_curves import Calibration, expected_improvement, extrapolate
from hpo.search.tpe import _SplitModel
from hpo.trial import Job


def step_budgets(min_budget: float, max_budget: float, growth: float) -> list[float]:
    """The budgets a lineage pauses at: geometric from min_budget to max_budget with a ratio
    close to `growth`. Where max_budget is whole and min_budget at least 1 (epochs), whole
    numbers from ceil(min_budget) (the runner trains whole epochs), duplicates dropped."""
    if max_budget <= min_budget:
        return [float(max_budget)]
    n = max(1, round(math.log(max_budget / min_budget) / math.log(growth)))
    steps = [min_budget * (max_budget / min_budget) ** (k / n) for k in range(n + 1)]
    steps[0], steps[-1] = float(min_budget), float(max_budget)
    if float(max_budget).is_integer() and min_budget >= 1:
        steps = sorted({float(max(round(b), math.ceil(min_budget))) for b in steps})
    return steps


@dataclass(frozen=True)
class _Predictions:
    mean: np.ndarray        # per lineage: predicted loss at max_budget
    std: np.ndarray
    gain: np.ndarray        # per lineage: expected improvement over the incumbent there
    incumbent: float
    new_gain: float         # what a new config is expected to improve


@dataclass
class _Lineage:
    """One configuration's jobs so far: its curve (loss per budget) and the trial whose
    checkpoint a continuation picks up. Its numbers live in `_Table`'s row of the same index."""

    config: dict[str, Any]
    vector: np.ndarray
    last_trial: int
    budgets: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


class _Table:
    """Per lineage, as arrays (ask() reads them whole): the step reached (-1: none yet), the
    last loss and the extrapolation from the whole curve, the same at its first step, and
    whether it runs or failed."""

    COLUMNS = {"step": -1, "last": np.nan, "mean": np.nan, "spread": 0.0, "first_loss": np.nan,
               "first_mean": np.nan, "first_spread": 0.0, "running": True, "failed": False}

    def __init__(self):
        self.n = 0
        self._arrays = {name: np.full(64, default) for name, default in self.COLUMNS.items()}

    def add(self) -> int:
        if self.n == len(self._arrays["step"]):
            self._arrays = {name: np.concatenate([a, np.full(len(a), self.COLUMNS[name])])
                            for name, a in self._arrays.items()}
        self.n += 1
        return self.n - 1

    def __getattr__(self, name: str) -> np.ndarray:
        if name.startswith("_") or name not in self.COLUMNS:
            raise AttributeError(name)
        return self._arrays[name][:self.n]


class FreezeThaw(Searcher):
    """Freeze-thaw search over learning curves (see the module docstring). `growth`: the
    ratio between a lineage's steps (default `eta`). `climbers`: lineages that climb to
    max_budget before the expected improvement decides (default 1). `n_startup`: Latin-hypercube configs
    before the model runs (default max(10, dimensions + 2)). `num_samples`,
    `top_n_percent`, `min_bandwidth`: the TPE that proposes new configurations."""

    reads_curves = True

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, growth: float | None = None, n_startup: int | None = None,
                 climbers: int = 1,
                 num_samples: int = 64, top_n_percent: float = 15, min_bandwidth: float = 0.01,
                 objectives=None, constraints=None, tie_break: str = "hypervolume"):
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget,
                         eta=eta, objectives=objectives, constraints=constraints, tie_break=tie_break)
        if self.goals.multi:
            raise ValueError(f"FreezeThaw optimises one objective; objectives={objectives!r} names "
                             f"{len(self.goals.objectives)}")
        if self.goals.constraints:
            raise ValueError(f"FreezeThaw does not support constraints; got constraints={constraints!r}")
        if growth is not None and not growth > 1:
            raise ValueError(f"growth must be > 1, got {growth}")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if not 0 < top_n_percent < 100:
            raise ValueError(f"top_n_percent must be in (0, 100), got {top_n_percent}")
        if climbers < 0:
            raise ValueError(f"climbers must be >= 0, got {climbers}")
        self.climbers = int(climbers)
        self.growth = self.eta if growth is None else float(growth)
        self.steps = step_budgets(self.min_budget, self.max_budget, self.growth)
        self.n_startup = max(10, len(self.space) + 2) if n_startup is None else int(n_startup)
        self.num_samples = int(num_samples)
        self.top_n_percent = float(top_n_percent)
        self.min_bandwidth = float(min_bandwidth)
        self.dims = dimensions_of(self.space)
        self.calibration = Calibration(self.steps)
        self.lineages: list[_Lineage] = []
        self.table = _Table()
        self._conditional = any(p.when for p in self.space)
        self._lineage_of: dict[int, int] = {}          # trial id -> index into lineages
        self._design: list[np.ndarray] | None = None   # Latin-hypercube rows not handed out yet
        self._version = 0                               # results told so far: what the caches are keyed by
        self._predicted: tuple[tuple[int, int], _Predictions] | None = None
        self._model: tuple[int, _SplitModel] | None = None
        self.continued = 0

    # --- asking ---------------------------------------------------------------------------
    def _next_job(self) -> Job | None:
        if not self._queue and len(self.lineages) >= self.n_startup:
            index = self._climber()
            if index is None:
                index = self._best_continuation()
            if index is not None:
                return self._continue(index)
        return self._start(self._new_config())

    def _start(self, config: dict[str, Any]) -> Job:
        self.sampler.seen.add(config_key(config))
        job = self._new_job(config, self.steps[0])
        self._lineage_of[job.trial_id] = self.table.add()
        self.lineages.append(_Lineage(config=dict(config), vector=self.space.to_unit(config), last_trial=job.trial_id))
        return job

    def _continue(self, index: int) -> Job:
        lineage = self.lineages[index]
        job = self._new_job(lineage.config, self.steps[self.table.step[index] + 1], continues=lineage.last_trial)
        self._lineage_of[job.trial_id] = index
        lineage.last_trial = job.trial_id
        self.table.running[index] = True
        self.continued += 1
        return job

    def predictions(self) -> _Predictions:
        """Per lineage (in start order), the predicted loss at max_budget and its standard
        deviation (the observed loss, std 0, for those that reached it; NaN for those with
        no result yet; inf for failed ones), the incumbent, and the gain a new config is
        expected to bring. Recomputed only when a result arrived."""
        key = (self._version, self.table.n)    # a new lineage (asked, no result yet) adds a NaN row
        if self._predicted is None or self._predicted[0] != key:
            self._predicted = (key, self._predict())
        return self._predicted[1]

    def _predict(self) -> _Predictions:
        t, last = self.table, len(self.steps) - 1
        step = np.maximum(t.step, 0)
        shift, trust = self.calibration.shift(), self.calibration.trust()
        calibrated = self.calibration.std(self._first_step_spread())
        paused = ~t.failed & (t.step >= 0) & (t.step < last)
        done = ~t.failed & (t.step == last)
        predicted = t.last + shift[step] + trust[step] * (t.mean - t.last)
        mean = np.where(t.failed, math.inf, np.where(paused, predicted, t.last))
        std = np.where(paused, np.hypot(trust[step] * t.spread, calibrated[step]), 0.0)
        # The incumbent is observed, never predicted: before any lineage got to max_budget,
        # the best loss seen anywhere (an upper bound on its lineage's final loss where
        # curves fall), so an over-promising extrapolation cannot set the bar.
        seen = ~t.failed & (t.step >= 0)
        incumbent = float(t.last[done].min()) if done.any() else float(t.last[seen].min()) if seen.any() else math.inf
        finite = np.isfinite(mean)
        gain = np.zeros(t.n)
        if math.isfinite(incumbent):
            gain[finite] = expected_improvement(mean[finite], std[finite], incumbent)
        # A new config, once its first step ran, is predicted as a paused lineage at the first
        # step is: its gain is the mean of the gains the lineages so far had there (a failed
        # one's is 0), so that the two compare like for like. (The latest 20 lineages only,
        # as the model's proposals improve, did no better on LCBench's tuning tasks.)
        population = t.failed | ~np.isnan(t.first_mean)
        new_gain = 0.0
        if population.any() and math.isfinite(incumbent):
            ok = ~t.failed & ~np.isnan(t.first_mean)
            first_gain = np.zeros(t.n)
            first = t.first_loss[ok] + shift[0] + trust[0] * (t.first_mean[ok] - t.first_loss[ok])
            first_gain[ok] = expected_improvement(first, np.hypot(trust[0] * t.first_spread[ok], calibrated[0]),
                                                  incumbent)
            new_gain = float(first_gain[population].mean())
        return _Predictions(mean=mean, std=std, gain=gain, incumbent=incumbent, new_gain=new_gain)

    def _first_step_spread(self) -> float:
        """How far configs differ at the first step (robust std of its losses): the scale of
        the calibration's prior."""
        first = self.table.first_loss
        first = first[np.isfinite(first)]
        if len(first) < 2:
            return 1.0 if not len(first) else max(abs(float(first[0])), 1e-6)
        low, high = np.percentile(first, [25, 75])
        return float((high - low) / 1.349) or float(first.std()) or 1e-6

    def _climber(self) -> int | None:
        """Until `climbers` lineages reached max_budget (or run towards it), the deepest paused
        lineage, the best predicted among equals, continues whatever its expected improvement:
        the calibration learns only from complete curves, and without them the raw
        extrapolations (and the prior's spread) decide."""
        t, last = self.table, len(self.steps) - 1
        climbing = (t.step == last) | (t.running & (t.step >= 0))
        if climbing.sum() >= self.climbers:
            return None
        paused = ~t.running & ~t.failed & (t.step >= 0) & (t.step < last)
        if not paused.any():
            return None
        mean = self.predictions().mean
        rows = np.flatnonzero(paused)
        return int(rows[np.lexsort((mean[rows], -t.step[rows]))[0]])

    def _best_continuation(self) -> int | None:
        """The paused lineage with the largest EI per epoch left, if that beats a new config's."""
        predicted, t = self.predictions(), self.table
        paused = ~t.running & ~t.failed & (t.step >= 0) & (t.step < len(self.steps) - 1)
        if not paused.any():
            return None
        left = self.max_budget - np.asarray(self.steps)[np.maximum(t.step, 0)]
        score = np.where(paused, predicted.gain / np.where(paused, left, 1.0), -math.inf)
        best = int(np.argmax(score))
        return best if score[best] > predicted.new_gain / self.max_budget else None

    def _new_config(self) -> dict[str, Any]:
        pending = [j.config for j in self.pending.values()]
        if self._queue:
            return self._propose(self.steps[0])
        mean = self.predictions().mean
        told = ~np.isnan(mean)
        if told.sum() >= self.n_startup:
            priors = self.sampler.priors
            if priors.enabled and self.rng.random() < priors.share * self.n_startup / told.sum():
                return self.sampler.fresh(self.rng, pending)
            config = self._model_config(mean, told, pending)
            if config is not None:
                return config
        if self._design is None and not self.sampler.priors.enabled:
            self._design = list(latin_hypercube(self.rng, self.n_startup, len(self.dims)))
        taken = self.sampler.taken(pending)
        while self._design:
            config = self.space.from_unit(self._design.pop(0))
            if config_key(config) not in taken:
                return config
        return self.sampler.fresh(self.rng, pending)

    def _model_config(self, mean: np.ndarray, told: np.ndarray, pending) -> dict[str, Any] | None:
        """TPE over the lineages split by predicted final loss: the best of num_samples draws
        from l(x) by l(x) / g(x), unseen and not pending."""
        if self._model is None or self._model[0] != self._version:
            rows = np.flatnonzero(told)
            vectors = np.array([self.lineages[i].vector for i in rows])
            self._model = (self._version, _SplitModel(vectors, mean[rows], self.top_n_percent / 100, self.dims,
                                                      self.min_bandwidth))
        model = self._model[1]
        candidates = model.sample_good(self.rng, self.num_samples)
        configs = None
        if self._conditional:     # score only what is active in each candidate: an inactive value says nothing
            configs = [self.space.from_unit(row) for row in candidates]
            candidates = np.array([self.space.to_unit(c) for c in configs])
        score = model.score(candidates)
        taken = self.sampler.taken(pending)
        for index in np.argsort(-score, kind="stable"):
            config = configs[index] if configs is not None else self.space.from_unit(candidates[index])
            if config_key(config) not in taken:
                return config
        return None

    # --- telling --------------------------------------------------------------------------
    def _on_result(self, job: Job, loss: float) -> None:
        index = self._lineage_of[job.trial_id]
        lineage, t = self.lineages[index], self.table
        t.running[index] = False
        self._version += 1
        if not math.isfinite(loss):
            t.failed[index] = True
            return
        start = self.steps[t.step[index]] if t.step[index] >= 0 else 0.0
        curve = self.history[-1][1].curve
        sign = 1.0 if self.direction == "minimize" else -1.0
        width = (job.budget - start) / max(1, len(curve))
        for i, value in enumerate(curve[:-1]):      # the last is the job's value, told as `loss`
            if math.isfinite(value):
                lineage.budgets.append(start + (i + 1) * width)
                lineage.losses.append(sign * float(value))
        lineage.budgets.append(job.budget)
        lineage.losses.append(loss)
        t.step[index] = self.steps.index(job.budget)
        if t.step[index] > 0:
            self._calibrate(lineage, int(t.step[index]))
        predicted = extrapolate(lineage.budgets, lineage.losses, self.max_budget)
        t.last[index], t.mean[index], t.spread[index] = loss, predicted.mean, predicted.std
        if np.isnan(t.first_mean[index]):
            t.first_mean[index], t.first_spread[index], t.first_loss[index] = predicted.mean, predicted.std, loss

    def _calibrate(self, lineage: _Lineage, step: int) -> None:
        """A lineage reached `step`: for every step it passed before, what the extrapolation
        from there promised for this budget, and what came true. A pair that stops short of
        max_budget is scaled up by the square root of the share of the log distance it
        covers: the calibration speaks of max_budget, and the error grows with the distance
        as a random walk's would (linear growth overstated it: measured on LCBench, where the
        first step's spread then hid every difference between configs)."""
        budgets, losses = np.array(lineage.budgets), np.array(lineage.losses)
        target, remaining = self.steps[step], self.calibration.remaining
        for k, budget in enumerate(self.steps[:step]):
            prefix = budgets <= budget + 1e-9
            if prefix.any() and remaining[k] > remaining[step]:
                then = losses[prefix][-1]
                promised = extrapolate(budgets[prefix], losses[prefix], target).mean - then
                scale = math.sqrt(remaining[k] / (remaining[k] - remaining[step]))
                self.calibration.add(k, scale * promised, scale * (losses[-1] - then))

    # --- reporting ------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        stats = super().stats()
        stats.update({"lineages": float(self.table.n), "continued": float(self.continued),
                      "lineages_at_max_budget": float((self.table.step == len(self.steps) - 1).sum())})
        return stats
