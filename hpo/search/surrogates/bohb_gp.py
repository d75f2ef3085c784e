"""A Gaussian-process config model for BOHB (`BOHB(model="gp")`, `BOHB`'s default).

Everything but the proposal is the multi-fidelity TPE's (`hpo.search.surrogates.tpe`): the ranking
across budgets, the rung-agreement guards and the brackets BOHB skips, the climbing bracket,
the Latin hypercube opening, the probes. Where the TPE would draw from l(x) and take the
best l(x) / g(x), this model fits a Gaussian process (`hpo.search.surrogates.config_gp.ConfigGP`,
FreezeThaw's: Matern 5/2, one lengthscale per dimension by marginal likelihood, on normal
scores of ranks) and proposes the config of the largest expected improvement among
candidates (`candidates`): by default the better half, by l(x) / g(x), of the TPE's own
draws from l(x), joined by uniform draws and neighbours of the best configs once the top
budget holds `explore_from` results (see EXPLORE_FROM); or those wide candidates alone
(`config_gp.expected_improvement_candidates`, SMAC's local search around its incumbents).
What it is fitted on (`fit_on`):

- "joint" (default): every result at a trusted budget, with the budget (log scale, 0 to 1
  over the trusted budgets with results) as one more input; EI is taken at the top budget
  against the best result there. The process proposes wherever the TPE's model would (once
  two results are in), whereas "top" leaves the proposals to the TPE until one budget holds
  `n_startup` results (see FIT_ON for what each measured).
- "top": the losses at the largest budget with at least `n_startup` results (until then
  the TPE proposes).
- "ranking": the ranking the TPE splits (deeper first, then by loss, the worse half of a
  budget after the better half of every budget, untrusted budgets left out).

`noise`: the noise variance of every row in the normal scores' units; by default large
while there are few rows (exploration: LCBench's best configs sit on edges of the cube) and
small once there are many, so the process goes through the best results and expected
improvement refines around them (with FreezeThaw's 0.1 throughout it drifted to the edges
of the cube and never refined; see NOISE). On a conditional space the process reads an
inactive parameter as INACTIVE, outside the unit cube, as SMAC3's random forest does: the
configs of one branch agree there, and a config of another branch is at least a unit away.
A space with an unordered choice and no condition keeps the TPE's proposals (0 / 1 apart
under one lengthscale, the process cannot learn that the choice switches which other
parameters matter: on the synthetic suite's flattened conditional spaces it lost to the
TPE, branch4_strong_flat 1.845 against 1.135), and so does a space with priors (their
learnt share was measured with the TPE: with the process, a wrong prior cost more than
`tests/unit/test_priors.py` allows).

While configs are pending (asynchronous workers) the process has none of their results, and
expected improvement would hand every worker that asks meanwhile the same peak. With
`batch="penalty"` (`AsyncBOHB`'s default), a share `batch_share` of the proposals made while
configs are pending take the log of expected improvement plus the TPE's local penalty for
closeness to each pending config (`_pending_penalty`, its scale from l(x)'s configs). From
`thompson_from` configs pending on (`AsyncBOHB`'s default: THOMPSON_FROM; the config being
proposed is not counted), every proposal is instead the candidate of the lowest value in one
joint draw of the process's posterior at the top budget (Thompson sampling, as Kandasamy et
al., AISTATS 2018, run it asynchronously), among the THOMPSON_KEEP candidates of the lowest
mean minus two standard deviations (chosen among all of them; with `candidates="tpe"` those
of the worse half by l(x) / g(x) are then left out): the workers spread over the regions
that could hold the optimum, each in proportion to its chance of holding it. Where the TPE
proposes for the process (an unordered choice without a condition, priors, or before the
process's first fit), it takes its own penalty. With `candidates="tpe"` either chooses
within the better half by l(x) / g(x), which is chosen without it. One worker asks as with
`batch="argmax"`, which turns both off.

ask() stays cheap: the process is fitted on at most MAX_GP_ROWS rows (the best half and
the latest half), refactored only when a result arrived, and its lengthscales are refitted
only when the rows it could be fitted on have grown by a quarter since the last fit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hpo.search.base import optional_count
from hpo.search.surrogates.config_gp import (
    REFIT_GROWTH,
    ConfigGP,
    best_and_latest,
    expected_improvement_candidates,
    first_unseen,
    inside_bounds,
)
from hpo.search.surrogates.kde import Dimension
from hpo.search.surrogates.tpe import MultiFidelityTPESampler
from hpo.space import SearchSpace

# The noise variance of every row, in the normal scores' units, by default: NOISE_FEW while
# the process has FEW_ROWS rows or fewer, then falling as 1 / rows^4 to NOISE (reached at 32
# rows). FreezeThaw's 0.1 throughout smoothed the best results away at 132 full-budget
# evaluations: on MFHartmann the posterior mean at the best row sat about 1.1 above its
# score, expected improvement below that score was largest where the process knew least, on
# the edges of the cube, and the search never refined. 1e-3 throughout fixed that but cost
# LCBench at 20 the exploration 0.1 bought there; 0.1 up to 20 rows cost branin_mf and
# noisy_branin, and falling as 1 / rows^2 from there, MFHartmann at 132 (benchmarks/notes/published_bohb.md,
# "BOHB's Gaussian process: why it lost MFHartmann").
NOISE_FEW, FEW_ROWS, NOISE = 0.1, 10, 1e-3
MAX_GP_ROWS = 150
# What the process is fitted on (`fit_on`). "joint" against "top", BOHB's mean final regret
# over the same seeds: the synthetic suite at 20 full-budget evaluations 0.289 against 0.427
# of the better of Optuna's two (worst problem 0.736 against 0.978; seeds 0-39); MFHartmann
# 0.941 of "top"'s at 20 (seeds 0-19) and 0.778 at 132 (seeds 0-9; mfh6_bad 1.148); LCBench
# 0.981 at 20 (seeds 0-59) and 0.908 at 132 (seeds 0-9; 167185 1.68); rbv2_xgboost, where
# nothing resumes, 0.772 of the best peer's against 0.920 at 20
# (benchmarks/notes/published_bohb.md, "The process on every trusted budget", "BOHB when
# nothing resumes").
FIT_ON = ("ranking", "top", "joint")
# What expected improvement chooses among (`candidates`): "tpe" (default), the TPE's own
# `num_samples` draws from its good density l(x), the better half of them by l(x) / g(x);
# "uniform", uniform draws and neighbours of the best configs
# (`config_gp.expected_improvement_candidates`). Refining around the best configs is what
# trusts a lucky draw on a noisy problem (with "uniform" the synthetic suite's noisy_levy4
# ended at 1.6 times the best peer's regret); l(x) keeps the proposals where the ranking of
# every budget points. 512 draws measured the same and cost 18-27 ms an ask with 1,000
# finished trials (benchmarks/notes/published_bohb.md, "BOHB's Gaussian process over the TPE's candidates").
CANDIDATES = ("tpe", "uniform")
# With candidates "tpe", once the largest budget reached holds EXPLORE_FROM results
# (`explore_from`; with one budget, every result counts) the TPE's draws are joined
# by the wide candidates: uniform draws and neighbours of the best configs, where a step past
# a bound lands on it. The TPE's l(x) can lock onto the first good basin it finds; on
# LCBench 126029 at 132 full-budget evaluations 11 of 40 seeds ended in a second basin, away
# from the vertex of the cube the best configs sit at, and uniform draws let expected
# improvement leave it. From the process's first fit on they cost the synthetic traps
# (lr_trap5 went from 0.88 to 1.23 times the best peer's regret); with 30 results at the top
# the process knows the space well enough that its expected improvement there points at
# real gaps. The neighbours keep the incumbents refined: uniform draws alone cost 167200
# (benchmarks/notes/published_bohb.md, "BOHB's wide candidates late in a long search"). Counted at the
# top budget, a search of fewer than 30 full-budget evaluations of budget never widens.
EXPLORE_FROM = 30
# An inactive parameter's value in the process's inputs (a conditional space): -1, outside
# the unit cube, as SMAC3's random forest reads it. With it, BOHB's process on rbv2_xgboost
# (the booster gates 8 of 14 parameters) read 0.877 of the best peer's regret at 20
# full-budget evaluations where the TPE read 0.992 (benchmarks/notes/published_bohb.md, "BOHB
# when nothing resumes"); read as the middle of the range, 0.5, an inactive value would sit
# among the active ones.
INACTIVE = -1.0
# From how many pending configs on `AsyncBOHB` takes Thompson draws (`thompson_from`). With
# every pending proposal a draw, against the penalty on half of them: on 64 and 256 simulated
# workers it ended the window at 0.78 and 0.88 of the penalty's regret and reached the
# 1-worker result sooner (24.7x against 20.9x over 12 seeds at 64 workers; 79.6x against 69.3x
# at 256; LCBench's time as its surrogate gives it); on 4 and 16 workers it trailed a quarter
# of the way (1.76 and 1.31 times the regret) and was slower to the 1-worker result
# (benchmarks/notes/many_workers.md, "Thompson draws"). With 32, those worker counts ask as
# with the penalty alone.
THOMPSON_FROM = 32
# Candidates a Thompson draw is taken over: those of the lowest mean minus
# two standard deviations, as the rest would almost never hold a draw's minimum; a joint draw
# over all of them (up to 576 once the wide candidates join: the TPE's 64 draws and 512 wide
# ones) took the driver's load at 64 simulated workers from 0.013 to 0.053.
THOMPSON_KEEP = 128
# The keyword arguments GPSampler adds to the TPE's: BOHB refuses them by name for another
# model or several objectives.
GP_ONLY_OPTIONS = frozenset({"fit_on", "noise", "candidates", "explore_from", "thompson_from"})


def inactive_as_nan(space: SearchSpace, points: np.ndarray) -> np.ndarray:
    """Unit-cube rows with each dimension that its row's parents make inactive set to NaN,
    and each active one that was NaN (a neighbour that switched its parent) set to 0.5, as
    `space.from_unit` decodes it: `space.to_unit(space.from_unit(row))`'s NaNs, with the
    active values left as they are rather than moved to their int's or choice's slot."""
    out = np.array(points, dtype=float)
    active = space.active_mask(out)
    out[~active] = np.nan
    out[active & np.isnan(out)] = 0.5
    return out


class GPSampler(MultiFidelityTPESampler):
    """BOHB's Gaussian-process model; options as the TPE's (`MultiFidelityTPESampler`), plus
    `fit_on` ('joint', the default, 'top' or 'ranking'; see FIT_ON), `noise` (> 0, fixed;
    None: by the rows' number), `candidates` ('tpe' or 'uniform', see CANDIDATES),
    `explore_from` (results at the top budget from which 'tpe' candidates are joined by the
    wide ones, see EXPLORE_FROM; None: never; 'uniform' candidates are wide throughout), and
    `thompson_from` (configs pending, besides the one being proposed, from which every
    proposal is a Thompson draw in place of `batch="penalty"`, which it needs; None: never;
    see the module's docstring)."""

    def __init__(self, space: SearchSpace, *, fit_on: str = "joint", noise: float | None = None,
                 candidates: str = "tpe", explore_from: int | None = EXPLORE_FROM,
                 thompson_from: int | None = None, **options):
        super().__init__(space, **options)
        self.thompson_from = optional_count("thompson_from", thompson_from, least=1)
        if thompson_from is not None and self.batch == "argmax":
            raise ValueError(f"thompson_from={thompson_from!r} takes the place of batch='penalty' from that many "
                             f"pending configs on, and needs it: got batch='argmax'")
        if candidates not in CANDIDATES:
            raise ValueError(f"candidates must be one of {list(CANDIDATES)}, got {candidates!r}")
        self.candidates = candidates
        self.explore_from = optional_count("explore_from", explore_from, least=0)
        if fit_on not in FIT_ON:
            raise ValueError(f"fit_on must be one of {list(FIT_ON)}, got {fit_on!r}")
        if noise is not None and not noise > 0:
            raise ValueError(f"noise must be > 0, got {noise!r}")
        self.fit_on = fit_on
        self.noise = None if noise is None else float(noise)
        self._gp: tuple[tuple, ConfigGP, np.ndarray] | None = None    # (data key, model, its rows' vectors by rank)
        self._scales: tuple[int, np.ndarray] | None = None          # (configs when they were fitted, log lengthscales)
        # An unordered choice is 0 / 1 apart under one lengthscale: the process cannot learn that
        # it switches which other parameters matter (the TPE's per-dimension densities can),
        # unless conditions say so (INACTIVE).
        self._choice_without_condition = any(dim.kind == "u" for dim in self.dims) and not self._conditional

    def _best_candidate(self, rng: np.random.Generator, pending) -> dict[str, Any] | None:
        if self.priors.enabled or self._choice_without_condition:
            return super()._best_candidate(rng, pending)
        fitted = self._fit_gp()
        if fitted is None:
            return super()._best_candidate(rng, pending)
        model, ranked = fitted
        thompson = self.thompson_from is not None and len(pending) >= self.thompson_from
        keep_away = not thompson and self._keeps_away(rng, pending)
        good_points = self._fit().good_points if keep_away else None
        best = self._joint_best if self.fit_on == "joint" else None     # None: the best row's score

        def active(points):     # a candidate's inactive values as the rows' (INACTIVE)
            return inactive_as_nan(self.space, points) if self._conditional else points

        def at_top(points):     # "joint": the process's inputs at the top budget
            return np.column_stack([points, np.ones(len(points))]) if self.fit_on == "joint" else points

        def score(points):
            points = active(points)
            gain = model.expected_improvement(at_top(points), best)
            if keep_away:
                gain = np.log(np.maximum(gain, 1e-300)) + self._pending_penalty(good_points, points, pending)
            return gain
        drawn: list[np.ndarray] = []

        def collect(points):    # kept for one joint draw over every candidate, below
            drawn.append(points)
            return np.zeros(len(points))
        scorer = collect if thompson else score
        parts = [self._good_half(rng, scorer)] if self.candidates == "tpe" else []
        if self.candidates == "uniform" or (self.explore_from is not None
                                            and self._results_at_top() >= self.explore_from):
            # Without FreezeThaw's finer round: here it cost LCBench at 132 full-budget evaluations.
            parts.append(expected_improvement_candidates(rng, self.dims, ranked, scorer, refine=False))
        candidates, scores = (np.concatenate(column) for column in zip(*parts))
        if thompson:        # the worse half by l(x) / g(x) stays last (scored -inf)
            draw = model.sample(rng, at_top(active(np.concatenate(drawn))), THOMPSON_KEEP)
            scores = np.where(np.isfinite(scores), -draw, -np.inf)
        return first_unseen(self.space, inside_bounds(candidates), scores, self.taken(pending))

    def _results_at_top(self) -> int:
        """How many results the largest budget reached so far holds (all budgets count while
        none is larger: with one budget, every result)."""
        return len(self.by_budget[max(self.by_budget)]) if self.by_budget else 0

    def _good_half(self, rng: np.random.Generator, score) -> tuple[np.ndarray, np.ndarray]:
        """(candidates, scores): `num_samples` draws from the TPE's l(x), scored by `score`
        (expected improvement), the worse half by l(x) / g(x) scored -inf."""
        split = self._fit()
        candidates = self._sample_good(rng, split, self.num_samples)
        if self._conditional:       # l(x) / g(x) scores only the active values, as the TPE's
            candidates = inactive_as_nan(self.space, candidates)
        scores = np.array(score(candidates), dtype=float)
        scores[np.argsort(-split.score(candidates), kind="stable")[self.num_samples // 2:]] = -np.inf
        return candidates, scores

    def _fit_gp(self) -> tuple[ConfigGP, np.ndarray] | None:
        """The process (refitted only when a result or a failure arrived) and its rows' vectors, best first."""
        key = self._data_key()
        if self._gp is not None and self._gp[0] == key:
            return self._gp[1], self._gp[2]
        data = self._rows_to_fit()
        if data is None:
            return None
        vectors, scores = data
        total = len(scores)
        keep = best_and_latest(scores, MAX_GP_ROWS)
        vectors, scores = vectors[keep], scores[keep]
        scales = None
        if self._scales is not None and total < REFIT_GROWTH * self._scales[0]:
            scales = self._scales[1]
        dims = self.dims + [Dimension("c")] if self.fit_on == "joint" else self.dims
        model = ConfigGP(vectors, scores, dims, scales, base_noise=self.row_noise(len(scores)), inactive=INACTIVE)
        if scales is None:
            self._scales = (total, model.log_scales)
        if self.fit_on == "joint":
            at_top = vectors[:, -1] >= 1.0
            self._joint_best = float(model.y[at_top].min())
            ranked = vectors[np.lexsort((scores, ~at_top)), :-1]     # the top budget's rows first, best first
        else:
            ranked = vectors[np.argsort(scores, kind="stable")]
        self._gp = (key, model, ranked)
        return model, ranked

    def row_noise(self, rows: int) -> float:
        """The noise variance of each of `rows` rows: `noise` where given, else NOISE_FEW up to
        FEW_ROWS rows, falling as 1 / rows^4 to NOISE."""
        if self.noise is not None:
            return self.noise
        return max(NOISE, NOISE_FEW * min(1.0, (FEW_ROWS / rows) ** 4))

    def _rows_to_fit(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(vectors, scores to minimise) in the order the rows were first observed (latest
        last), then every failed config, scored +inf (the process gives them all the worst
        score, `ConfigGP`); a config that failed at one budget is left out of the others'."""
        rows = self._successful_rows()
        if rows is None or not self._failed:
            return rows
        failed = self._failures()[1]
        if self.fit_on == "joint":       # a failure is bad at the top budget
            failed = np.column_stack([failed, np.ones(len(failed))])
        return np.concatenate([rows[0], failed]), np.concatenate([rows[1], np.full(len(failed), np.inf)])

    def _successful_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self.fit_on == "joint":
            return self._joint_rows()
        table = self._table[:len(self._rows)]
        budgets, losses, vectors = table[:, 0], table[:, 1], table[:, 2:]
        if self.fit_on == "top":
            enough = [b for b, results in self.by_budget.items() if len(results) >= self.n_startup]
            if not enough:
                return None
            top = max(enough)
            keys = [key for key in self.by_budget[top] if key not in self._failed]
            return vectors[[self._rows[key] for key in keys]], np.array([self.by_budget[top][key][0] for key in keys])
        losses = self.split_losses(budgets, losses)
        order = self._ranked_reliable(budgets, losses) if self.rungs == "reliable" \
            else np.lexsort((losses, -budgets))
        if len(order) < 2:
            return None
        if self._failed:
            order = order[~np.isin(order, self._failures()[0])]
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
        table = self._table[:len(self._rows)]
        failed = self._failures()[0] if self._failed else None
        rows, budget_inputs, losses, order = [], [], [], []
        # Array slices per budget, not a Python step per result: the rows are rebuilt on
        # every new result, so ask() would otherwise grow with the study, although the
        # process itself fits on at most MAX_GP_ROWS of them.
        for b in budgets:
            z = 1.0 if high == low else (math.log(b) - low) / (high - low)
            budget_rows = self._result_table_rows(b)
            budget_losses = self._results(b)[:, 0]
            if failed is not None:
                kept = ~np.isin(budget_rows, failed)
                budget_rows, budget_losses = budget_rows[kept], budget_losses[kept]
            rows.append(budget_rows)
            budget_inputs.append(np.full(len(budget_rows), z))
            losses.append(budget_losses)
            order.append(budget_rows + (b == budgets[-1]) * len(self._rows))
        order = np.concatenate(order)
        keep = np.argsort(order, kind="stable")     # older configs first, the top budget's rows last
        vectors = np.empty((len(keep), table.shape[1] - 1))     # the config's vector, then its budget
        vectors[:, :-1] = table[np.concatenate(rows)[keep], 2:]
        vectors[:, -1] = np.concatenate(budget_inputs)[keep]
        return vectors, np.concatenate(losses)[keep]

    def stats(self) -> dict[str, float]:
        stats = super().stats()
        if self._scales is not None:
            stats["gp_rows_fitted"] = float(self._scales[0])
        return stats

