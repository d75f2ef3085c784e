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
  every lineage that went on from a step (`hpo.search.surrogates.learning_curves.Calibration`: how
  much of the promised improvement came true, and how far off it was); its score is
  EI / (max_budget - budget reached);
- a new configuration's loss at `max_budget` is predicted as the lineages' were after
  their first step, so its score is the mean of their EI there (failures counting as no
  improvement) / max_budget. The configuration itself, after `n_startup` Latin-hypercube
  configs, is the one of the largest expected improvement under a Gaussian process over
  configurations fitted to the lineages' predicted final losses (`hpo.search.surrogates.config_gp`: rank
  scores, Matern 5/2 with a lengthscale per dimension), among uniform draws and neighbours
  of the best lineages (SMAC's local search; a step past a bound lands on it, where
  LCBench's best configurations sit), then finer neighbours of the best of those.
  `model="tpe"`, and any conditional space, propose by a TPE split of the lineages by
  predicted final loss instead (`hpo.search.surrogates.tpe`'s estimators, which leave inactive values
  out): on the published tuning sets at 20 full-budget evaluations the Gaussian process's
  configs ended with 0.79 of the TPE's mean final regret on LCBench and 0.67 on MFHartmann
  (benchmarks/notes/freeze_thaw.md, "Freeze-thaw where the first epochs mislead").

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

Steps that mislead: extrapolating a curve trusts the ranking its first epochs give. Where
short training ranks configs the wrong way round (a learning rate that wins early and
loses late, a branch of the space that looks best early), every decision made from those
steps continues the wrong configs. So, after the climber, the first `probes` (default 3)
new configs are probes: fresh configs run straight to `max_budget` in one job each,
whatever they would have scored early; their curves give their values at every step on
the way. (They come when the expected improvement would start a new config, not before
the continuations it prefers: taken ahead of those, they cost LCBench's tuning tasks more
than they showed.) Once MIN_TOP_RESULTS
lineages at max_budget have their own value at a step, the step is judged as BOHB judges its budgets
(`hpo.search.surrogates.rung_agreement`: Spearman's rho between the lineages' ranks at the step and
their final losses; under RHO_MIN it misleads). New configs then start at the first step
from which every step up is trusted (`entry_step`; max_budget itself where none is),
lineages paused below it are not continued, and the TPE learns only from lineages at
trusted steps. The probes are what shows a reversal: the lineages continued by expected
improvement were each step's best, and agree with one another by selection. Measured in
benchmarks/notes/freeze_thaw.md, "Freeze-thaw where the first epochs mislead".

Hand-over to BOHB: the learning curves pay early in a search, not late. Once `hand_over`
full-budget evaluations of budget were handed out (default HAND_OVER, 26: the epochs of every
job beyond the step its lineage had reached), BOHB (`hpo.search.bohb`: its default model,
Hyperband's brackets, no climbing bracket) schedules and proposes every later job. Its model
first learns every result freeze-thaw had, each at the rung nearest its step, and then every
later one; configs freeze-thaw ran are never proposed again, and its paused lineages stay
paused. A search of 20 full-budget evaluations, where freeze-thaw leads on LCBench, never
hands over. Measured in benchmarks/notes/freeze_thaw.md, "Freeze-thaw hands over to BOHB",
with BOHB's process fitted on one budget (`fit_on="top"`); a hand-over to BOHB's default
(`fit_on="joint"`, every trusted budget) is unmeasured.

Budgets that train from scratch (a fraction of the data): there is no curve to pause and
extrapolate, so `resumes=False` is refused at construction; BOHB takes it.

One objective, no constraints: with several the expected improvement is not defined, and
`objectives` or `constraints` raise a ValueError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpo.search.base import GoalsRefused, Searcher, config_key, latin_hypercube, optional_count
from hpo.search.bohb import BOHB
from hpo.search.schedule import rung_budgets
from hpo.search.surrogates.config_gp import (
    LOCAL_TOP,
    REFIT_GROWTH,
    ConfigGP,
    best_and_latest,
    expected_improvement_candidates,
    first_unseen,
    inside_bounds,
)
from hpo.search.surrogates.kde import dimensions_of
from hpo.search.surrogates.learning_curves import Calibration, expected_improvement, extrapolate
from hpo.search.surrogates.rung_agreement import MAX_LOWER, MAX_UPPER, agreement, features
from hpo.search.surrogates.tpe import RHO_MIN, _SplitModel
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


# Lineages at max_budget before the steps below are judged against them: the climber and
# the probes (`FreezeThaw.probes`).
MIN_TOP_RESULTS = 4
MODELS = ("gp", "tpe")    # what proposes new configurations (`FreezeThaw.model`)
MAX_GP_ROWS = 200        # the best half and the latest half of these when there are more lineages
MIN_MODEL_ROWS = 5    # lineages at trusted steps before the model proposes from them alone
# The budget, in full-budget evaluations (max_budget each), after which BOHB takes the search
# over (`FreezeThaw.hand_over`): past it the learning curves stop paying
# (benchmarks/notes/freeze_thaw.md, "Freeze-thaw hands over to BOHB"). Above 20, where
# freeze-thaw leads on LCBench, so that a search of 20 full-budget evaluations never hands over.
HAND_OVER = 26.0


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
    features: np.ndarray      # `rung_agreement.features` of the vector: its distances to others
    last_trial: int
    budgets: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


class _Table:
    """Per lineage, as arrays (ask() reads them whole): the step reached (-1: none yet), the
    last loss and the extrapolation from the whole curve, per step the loss there and the
    extrapolation from the curve up to there (`at_*`, lineages x steps; NaN where its curve
    did not pass the step), and whether it runs or failed."""

    COLUMNS = {"step": -1, "last": np.nan, "mean": np.nan, "spread": 0.0, "at_loss": np.nan,
               "at_mean": np.nan, "at_spread": 0.0, "running": True, "failed": False}
    PER_STEP = ("at_loss", "at_mean", "at_spread")

    def __init__(self, n_steps: int):
        self.n = 0
        self._arrays = {name: np.full((64, n_steps) if name in self.PER_STEP else 64, default)
                        for name, default in self.COLUMNS.items()}

    def add(self) -> int:
        if self.n == len(self._arrays["step"]):
            self._arrays = {name: np.concatenate([a, np.full(a.shape, self.COLUMNS[name])])
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
    max_budget before the expected improvement decides (default 1). `probes`: the first new
    configs after the climber run straight to max_budget, so that the steps' rankings can be judged
    (default 3; see "Steps that mislead"). `n_startup`: Latin-hypercube configs
    before the model runs (default max(10, dimensions + 2)). `model`: what proposes new
    configurations, "gp" (default) or "tpe"; `num_samples`, `top_n_percent`,
    `min_bandwidth`: that TPE's settings. `hand_over`: the budget, in full-budget
    evaluations, after which BOHB (its default model, warm-started with every result so far)
    schedules and proposes the rest of the search (default HAND_OVER, 26; None: never; see
    "Hand-over to BOHB"). `resumes`: whether a larger budget continues a trial from its
    checkpoint; only True is taken (freeze-thaw pauses and resumes learning curves)."""

    reads_curves = True

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, growth: float | None = None, n_startup: int | None = None,
                 climbers: int = 1, probes: int = 3,
                 model: str = "gp", num_samples: int = 64, top_n_percent: float = 15, min_bandwidth: float = 0.01,
                 hand_over: float | None = HAND_OVER, resumes: bool = True,
                 objectives=None, constraints=None, tie_break: str = "hypervolume"):
        if not resumes:
            # Refused before anything else: the reason, not a complaint about another argument.
            raise ValueError("FreezeThaw takes no resumes=False: freeze-thaw pauses learning curves and resumes "
                             "them from a checkpoint, so where each budget trains from scratch it has no curve "
                             "to extrapolate; use bohb, which takes resumes=False")
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget,
                         eta=eta, objectives=objectives, constraints=constraints, tie_break=tie_break)
        if self.goals.multi:
            raise GoalsRefused(f"FreezeThaw optimises one objective; objectives={objectives!r} names "
                               f"{len(self.goals.objectives)}", "objectives")
        if self.goals.constraints:
            raise GoalsRefused(f"FreezeThaw does not support constraints; got constraints={constraints!r}",
                               "constraints")
        if growth is not None and not growth > 1:
            raise ValueError(f"growth must be > 1, got {growth}")
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if not 0 < top_n_percent < 100:
            raise ValueError(f"top_n_percent must be in (0, 100), got {top_n_percent}")
        if climbers < 0:
            raise ValueError(f"climbers must be >= 0, got {climbers}")
        if probes < 0:
            raise ValueError(f"probes must be >= 0, got {probes}")
        if model not in MODELS:
            raise ValueError(f"model must be one of {list(MODELS)}, got {model!r}")
        if hand_over is not None and not float(hand_over) > 0:
            raise ValueError(f"hand_over must be > 0 full-budget evaluations (or None: never), got {hand_over!r}")
        self.hand_over = None if hand_over is None else float(hand_over)
        self.resumes = True
        self.climbers = int(climbers)
        self.probes = int(probes)
        self.growth = self.eta if growth is None else float(growth)
        self.steps = step_budgets(self.min_budget, self.max_budget, self.growth)
        self.n_startup = optional_count("n_startup", n_startup, least=1) or max(10, len(self.space) + 2)
        self.num_samples = int(num_samples)
        self.top_n_percent = float(top_n_percent)
        self.min_bandwidth = float(min_bandwidth)
        self.model = model
        self._gp: tuple[int, ConfigGP, int] | None = None    # (version, model, rows its scales fit)
        self.dims = dimensions_of(self.space)
        self.calibration = Calibration(self.steps)
        self.lineages: list[_Lineage] = []
        self.table = _Table(len(self.steps))
        self._conditional = any(p.when for p in self.space)
        self._conditional_dims = [bool(p.when) for p in self.space]
        self._lineage_of: dict[int, int] = {}          # trial id -> index into lineages
        self._design: list[np.ndarray] | None = None   # Latin-hypercube rows not handed out yet
        self._version = 0                               # results told so far: what the caches are keyed by
        self._predicted: tuple[tuple[int, int], _Predictions] | None = None
        self._model: tuple[int, _SplitModel] | None = None
        self.continued = 0
        self.probes_started = 0
        self.step_agreement: dict[float, float] = {}     # step budget -> Spearman's rho with max_budget
        self._agreements: dict[tuple, float] = {}        # (step, lineages there, at the top) -> rho
        self._trusted: tuple[int, np.ndarray] | None = None
        self.spent = 0.0          # budget handed out: each job's epochs beyond its lineage's last step
        self.successor: BOHB | None = None               # BOHB, once the search is handed over
        self._ours: dict[int, int] = {}                  # the successor's trial id -> ours
        self._successor_jobs: dict[int, Job] = {}        # our trial id -> the successor's job, while pending
        self._budgets: dict[int, float] = {}             # the successor's trial id -> its job's budget
        self._rungs = np.array(rung_budgets(self.min_budget, self.max_budget, self.eta))   # BOHB's budgets

    # --- asking ---------------------------------------------------------------------------
    def _next_job(self) -> Job | None:
        # Never inside a fill ask (`Searcher.ask`), which may return nothing: the hand-over must
        # come at an ask the study records, where a replay makes it again.
        if self.successor is None and self.hand_over is not None and self.spent >= self.hand_over * self.max_budget \
                and not self._filling:
            self._hand_over()
        if self.successor is not None:
            return self._successor_job()
        if not self._queue and len(self.lineages) >= self.n_startup:
            index = self._climber()
            if index is None:
                index = self._best_continuation()
            if index is not None:
                return self._continue(index)
            if self.probes_started < self.probes:
                self.probes_started += 1
                config = self.sampler.fresh(self.rng, [j.config for j in self.pending.values()])
                return self._start(config, len(self.steps) - 1)
        return self._start(self._new_config(), self.entry_step())

    def _start(self, config: dict[str, Any], step: int = 0) -> Job:
        self.sampler.seen.add(config_key(config))
        job = self._new_job(config, self.steps[step])
        self.spent += self.steps[step]
        self._lineage_of[job.trial_id] = self.table.add()
        vector = self.space.to_unit(config)
        self.lineages.append(_Lineage(config=dict(config), vector=vector, last_trial=job.trial_id,
                                      features=features(vector[None, :], self.dims, self._conditional_dims)[0]))
        return job

    def _continue(self, index: int) -> Job:
        lineage = self.lineages[index]
        job = self._new_job(lineage.config, self.steps[self.table.step[index] + 1], continues=lineage.last_trial)
        self.spent += job.budget - self.steps[self.table.step[index]]
        self._lineage_of[job.trial_id] = index
        lineage.last_trial = job.trial_id
        self.table.running[index] = True
        self.continued += 1
        return job

    # --- the hand-over to BOHB -------------------------------------------------------------
    def _hand_over(self) -> None:
        """BOHB takes the search over: its default model learns every result so far (at the
        rung nearest each step), and its brackets schedule the rest. Configs run so far are
        never proposed again, and paused lineages stay paused."""
        successor = BOHB(self.space, seed=self.seed, direction=self.direction, min_budget=self.min_budget,
                         max_budget=self.max_budget, eta=self.eta, climbers=0)
        for job, result in self.history:
            if job.trial_id in self._lineage_of:
                self._teach(successor, job, result)
        for config in self._queue:
            successor.enqueue(config)
        self._queue.clear()
        self.successor = successor

    def _teach(self, successor: BOHB, job: Job, result) -> None:
        """Tell BOHB's model about one of freeze-thaw's results, as if its own at the nearest rung."""
        rung = float(self._rungs[np.argmin(np.abs(np.log(self._rungs / job.budget)))])
        key, loss, sampler = config_key(job.config), successor.loss_of(result), successor.sampler
        sampler.seen.add(key)
        successor._failure_neighbours.record(key, job.config, failed=not math.isfinite(loss))
        if math.isfinite(loss):
            sampler.priors.record(job.config, rung, loss)
            sampler.observe(job.config, rung, loss)
        else:
            sampler.observe_failure(job.config, rung)

    def _successor_job(self) -> Job | None:
        """The successor's next job, under our trial ids (a promotion continues our trial)."""
        while self._queue:
            self.successor.enqueue(self._queue.pop(0))
        theirs = self.successor.ask(fill=self._filling)
        if theirs is None:
            return None
        continues = None if theirs.continues is None else self._ours[theirs.continues]
        job = self._new_job(theirs.config, theirs.budget, continues=continues, bracket=theirs.bracket,
                            rung=theirs.rung)
        self._ours[theirs.trial_id] = job.trial_id
        self._successor_jobs[job.trial_id] = theirs
        self._budgets[theirs.trial_id] = job.budget
        self.spent += job.budget - (self._budgets[theirs.continues] if theirs.continues is not None else 0.0)
        self.sampler.seen.add(config_key(job.config))
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
        # Where the first steps mislead, new configs start at the first trusted step
        # (`entry_step`), and are predicted as the lineages were there.
        k = self.entry_step()
        at_loss, at_mean, at_spread = t.at_loss[:, k], t.at_mean[:, k], t.at_spread[:, k]
        population = t.failed | ~np.isnan(at_mean)
        new_gain = 0.0
        if population.any() and math.isfinite(incumbent):
            ok = ~t.failed & ~np.isnan(at_mean)
            entry_gain = np.zeros(t.n)
            entry = at_loss[ok] + shift[k] + trust[k] * (at_mean[ok] - at_loss[ok])
            entry_gain[ok] = expected_improvement(entry, np.hypot(trust[k] * at_spread[ok], calibrated[k]),
                                                  incumbent)
            new_gain = float(entry_gain[population].mean())
        return _Predictions(mean=mean, std=std, gain=gain, incumbent=incumbent, new_gain=new_gain)

    def _first_step_spread(self) -> float:
        """How far configs differ at the first step (robust std of its losses): the scale of
        the calibration's prior."""
        first = self.table.at_loss[:, 0]
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

    def entry_step(self) -> int:
        """The first step from which every step up to max_budget ranks configs as max_budget
        does (`step_trust`): where new configs start, and below which a paused lineage's
        extrapolation is not acted on."""
        trusted = self.step_trust()
        untrusted = np.flatnonzero(~trusted)
        return int(untrusted[-1] + 1) if untrusted.size else 0

    def step_trust(self) -> np.ndarray:
        """Per step, whether its values rank configs as their values at max_budget do:
        `hpo.search.surrogates.rung_agreement`'s Spearman's rho, over the lineages at max_budget,
        between their (own, or their nearest neighbours') ranks at the step and their final
        losses, at least RHO_MIN (BOHB's threshold). Judged once MIN_TOP_RESULTS lineages
        at max_budget have their own value at the step; the probes, which ran there whatever their early values, are
        what lets a step that ranks the wrong way round show it: the lineages continued by
        expected improvement were the step's best, and agree with one another by selection."""
        if self._trusted is None or self._trusted[0] != self._version:
            self._trusted = (self._version, self._judge_steps())
        return self._trusted[1]

    def _judge_steps(self) -> np.ndarray:
        t, last = self.table, len(self.steps) - 1
        trusted = np.ones(len(self.steps), dtype=bool)
        top = np.flatnonzero(~t.failed & (t.step == last))
        for k in range(last):
            # Only the lineages at max_budget with their own value at the step judge it (with
            # curves, all of them): told finals only, a probe's rank there would be its
            # neighbours', and with a few lineages at the step that is noise, which, once it
            # moved the entry step up, nothing would come to correct.
            judges = top[~np.isnan(t.at_loss[top, k])][-MAX_UPPER:]
            rows = np.flatnonzero(~np.isnan(t.at_loss[:, k]))[-MAX_LOWER:]
            if len(judges) < MIN_TOP_RESULTS:
                continue
            # Recomputed when the top has a new lineage, and when the step's have grown by a
            # sixteenth (as BOHB's, `MultiFidelityTPESampler._reliability`).
            n = len(rows)
            key = (k, n - n % max(1, n // 16), len(judges))
            if key not in self._agreements:
                self._agreements = {a: rho for a, rho in self._agreements.items() if a[0] != k}
                lower = (np.array([self.lineages[i].features for i in rows]), t.at_loss[rows, k])
                upper = (np.array([self.lineages[i].features for i in judges]), t.last[judges])
                self._agreements[key] = agreement(lower, upper)
            rho = self._agreements[key]
            self.step_agreement[self.steps[k]] = rho
            trusted[k] = rho >= RHO_MIN
        return trusted

    def _best_continuation(self) -> int | None:
        """The paused lineage with the largest EI per epoch left, if that beats a new config's.
        Lineages paused below the entry step are left where they are: their extrapolations
        start from values that rank configs the wrong way."""
        predicted, t = self.predictions(), self.table
        paused = ~t.running & ~t.failed & (t.step >= self.entry_step()) & (t.step < len(self.steps) - 1)
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
            # The model learns from lineages at trusted steps only (and failures), as BOHB's
            # leaves out configs whose deepest budget misleads.
            t = self.table
            trusted = told & ((t.step >= self.entry_step()) | t.failed)
            if trusted.sum() < MIN_MODEL_ROWS:
                return self.sampler.fresh(self.rng, pending)
            told = trusted
            priors = self.sampler.priors
            if priors.enabled and self.rng.random() < priors.share * self.n_startup / told.sum():
                return self.sampler.fresh(self.rng, pending)
            # In a conditional space the TPE proposes: its estimators leave inactive values out,
            # where the Gaussian process would read them as the middle of their range.
            config = self._gp_config(mean, told, pending) if self.model == "gp" and not self._conditional \
                else self._model_config(mean, told, pending)
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
            # Uncapped (no `max_good`): by default FreezeThaw hands a search over to BOHB, whose
            # TPE caps l(x), after HAND_OVER full-budget evaluations, while its lineages are few
            # (with hand_over=None it never does, and l(x) grows with the search).
            self._model = (self._version, _SplitModel(vectors, mean[rows], self.top_n_percent / 100, self.dims,
                                                      self.min_bandwidth, last=self._model[1] if self._model else None))
        model = self._model[1]
        candidates = model.sample_good(self.rng, self.num_samples)
        return self._best_unseen(candidates, candidates, model.score, pending)

    def _gp_config(self, mean: np.ndarray, told: np.ndarray, pending) -> dict[str, Any] | None:
        # Failed lineages are rows too, at +inf: the process gives them the worst score, so
        # that a region that fails stops being proposed.
        rows = np.flatnonzero(told)
        rows = rows[best_and_latest(mean[rows], MAX_GP_ROWS)]
        if self._gp is None or self._gp[0] != self._version:
            vectors = np.array([self.lineages[i].vector for i in rows])
            scales = None
            if self._gp is not None and len(rows) < REFIT_GROWTH * self._gp[2]:
                scales = self._gp[1].log_scales
            # A lineage's loss at max_budget is predicted with a spread (0 where observed): its
            # row's noise, in the normal scores' units (the spread over the rows' IQR scale).
            std = self.predictions().std[rows]
            finite = mean[rows][np.isfinite(mean[rows])]
            low, high = np.percentile(finite, [25, 75]) if finite.size else (0.0, 0.0)
            spread = float((high - low) / 1.349) or float(finite.std() if finite.size else 0.0) or 1.0
            model = ConfigGP(vectors, mean[rows], self.dims, scales, noise=(std / spread) ** 2)
            fitted = len(rows) if scales is None else self._gp[2]
            self._gp = (self._version, model, fitted)
        model = self._gp[1]
        # Uniform draws, neighbours of the best lineages, then finer neighbours of the best of
        # those (`hpo.search.surrogates.config_gp`, shared with BOHB's Gaussian process).
        candidates, scores = expected_improvement_candidates(self.rng, self.dims, self._best_vectors(mean, told),
                                                             model.expected_improvement)
        return self._best_unseen(candidates, inside_bounds(candidates), lambda _: scores, pending)

    def _best_unseen(self, scored: np.ndarray, decoded: np.ndarray, score, pending) -> dict[str, Any] | None:
        """The config of the highest `score` among the candidates (unit-cube rows: `scored` as
        the model reads them, `decoded` as they become configs), unseen and not pending. In a
        conditional space each candidate is scored as its config encodes it: an inactive value
        says nothing."""
        if self._conditional:
            scored = self.space.units_round_trip(decoded)
        return first_unseen(self.space, decoded, score(scored), self.sampler.taken(pending))

    def _best_vectors(self, mean: np.ndarray, told: np.ndarray) -> np.ndarray:
        """The unit-cube vectors of the LOCAL_TOP best lineages by predicted final loss, best first."""
        rows = np.flatnonzero(told & np.isfinite(mean))
        rows = rows[np.argsort(mean[rows], kind="stable")[:LOCAL_TOP]]
        return np.array([self.lineages[i].vector for i in rows])

    # --- telling --------------------------------------------------------------------------
    def _on_result(self, job: Job, loss: float) -> None:
        theirs = self._successor_jobs.pop(job.trial_id, None)
        if theirs is not None:
            self.successor.tell(theirs, self.history[-1][1])
            return
        if self.successor is not None:     # a lineage that ran while the search was handed over
            self._teach(self.successor, job, self.history[-1][1])
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
        before, t.step[index] = t.step[index], self.steps.index(job.budget)
        if t.step[index] > 0:
            self._calibrate(lineage, int(t.step[index]))
        predicted = extrapolate(lineage.budgets, lineage.losses, self.max_budget)
        t.last[index], t.mean[index], t.spread[index] = loss, predicted.mean, predicted.std
        # Every step the curve passed (a lineage started above the first step passes those
        # below in its first job): the loss there, and the extrapolation from there.
        budgets = np.asarray(lineage.budgets)
        for k in range(before + 1, t.step[index] + 1):
            at = np.flatnonzero(np.abs(budgets - self.steps[k]) < 1e-9)
            if at.size:
                there = predicted if k == t.step[index] else extrapolate(
                    budgets[:at[-1] + 1], lineage.losses[:at[-1] + 1], self.max_budget)
                t.at_loss[index, k], t.at_mean[index, k] = lineage.losses[at[-1]], there.mean
                t.at_spread[index, k] = there.std

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
                      "lineages_at_max_budget": float((self.table.step == len(self.steps) - 1).sum()),
                      "entry_step": float(self.steps[self.entry_step()]),
                      "handed_over": float(self.successor is not None), "spent": self.spent / self.max_budget})
        for budget, rho in self.step_agreement.items():
            stats[f"step_agreement/{budget:g}"] = rho
        return stats
