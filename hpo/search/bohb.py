"""BOHB: Hyperband's budgets with a model-based choice of new configs
(Falkner, Klein and Hutter, ICML 2018). This module holds the paper's KDE model
(`model="kde"`); `BOHB`'s default model, `model="gp"` (`hpo.search.bohb_gp`), is the
multi-fidelity TPE of `hpo.search.tpe` (`model="tpe"`, `AsyncBOHB`'s default) with its
proposals chosen by a Gaussian process.

Observations are kept per budget. New configs are modelled on the largest budget that has
at least `min_points_in_model + 2` results: the best `top_n_percent` form l(x), the rest
g(x) (each at least `min_points_in_model` points, as in the paper). `num_samples`
candidates are drawn from l(x) with bandwidths widened by `bandwidth_factor`, and the one
maximising l(x) / g(x) is proposed. A `random_fraction` of proposals stay uniform, which
keeps the convergence guarantee of Hyperband.

`BOHB` schedules like synchronous Hyperband, except that with model 'gp' or 'tpe' (one
objective) the search opens with a climbing bracket, whose configs climb every rung
instead of starting at the top, in place of the first iteration's full-budget bracket; and
a bracket whose first budget misleads (its ranking disagrees with the top budget's, see
`hpo.search.tpe`) is skipped, down to plain model-based search at the full budget where
every lower budget misleads.
`AsyncBOHB` schedules like asynchronous Hyperband, so no worker waits at a rung
barrier. Both skip candidates equal to a pending or already
evaluated config.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from hpo.search.asha import AsyncHyperband
from hpo.search.base import ConfigSampler, check_model_options, config_key, spread_over_ranking
from hpo.search.hyperband import Hyperband, _BracketRun
from hpo.search.kde import KDE, dimensions_of, impute
from hpo.search.schedule import Bracket, Rung
from hpo.space import SearchSpace


class KDESampler(ConfigSampler):
    def __init__(self, space: SearchSpace, *, min_points_in_model: int | None = None, top_n_percent: float = 15,
                 num_samples: int = 64, random_fraction: float = 1 / 3, bandwidth_factor: float = 3.0,
                 min_bandwidth: float = 1e-3):
        super().__init__(space)
        check_model_options(top_n_percent, random_fraction, num_samples)
        self.min_points_in_model = len(space) + 1 if min_points_in_model is None else int(min_points_in_model)
        self.top_n_percent = top_n_percent
        self.num_samples = num_samples
        self.random_fraction = random_fraction
        self.bandwidth_factor = bandwidth_factor
        self.min_bandwidth = min_bandwidth
        self.dims = dimensions_of(space)
        self.observations: dict[float, list[tuple[np.ndarray, float]]] = {}
        self.failures: dict[str, np.ndarray] = {}      # config that failed -> unit vector
        self.model_budget: float | None = None     # the budget the last model was fitted on
        self._models: tuple[tuple, KDE, KDE] | None = None     # ((budget, results, failures), l(x), g(x))

    def observe(self, config: Mapping[str, Any], budget: float, loss: float) -> None:
        self.observations.setdefault(budget, []).append((self.space.to_unit(config), loss))

    def observe_failure(self, config: Mapping[str, Any], budget: float) -> None:
        """A failed config is the worst result (+inf) of whichever budget the model is fitted
        on (a config that fails at one budget is no good at another): in g(x), never in l(x)."""
        self.failures[config_key(config)] = self.space.to_unit(config)

    def stats(self) -> dict[str, float]:
        """The budget the KDEs were last fitted on (-1: no model yet) and its observations."""
        budget = self.model_budget
        return {"model_budget": -1.0 if budget is None else float(budget),
                "model_observations": float(len(self.observations.get(budget, []))) if budget is not None else 0.0}

    def propose(self, rng: np.random.Generator, budget: float, pending: list[Mapping[str, Any]]) -> dict[str, Any]:
        # Always draw the coin, so the random stream does not depend on whether a model exists.
        use_random = rng.random() < self.random_fraction
        models = None if use_random else self._fit(rng)
        config = None
        if models is not None:
            config = self._best_candidate(rng, *models, pending)
        if config is None:
            config = self._fresh_random(rng, pending)
        self.seen.add(config_key(config))
        return config

    def _fit(self, rng: np.random.Generator) -> tuple[KDE, KDE] | None:
        enough = [b for b, obs in self.observations.items() if len(obs) >= self.min_points_in_model + 2]
        if not enough:
            return None
        budget = max(enough)
        observations = self.observations[budget]
        key = (budget, len(observations), len(self.failures))
        if self._models is not None and self._models[0] == key:
            return self._models[1], self._models[2]
        vectors = np.array([v for v, _ in observations] + list(self.failures.values()))
        order = np.argsort([loss for _, loss in observations] + [np.inf] * len(self.failures), kind="stable")
        order = order[spread_over_ranking(len(order))]      # bounded rows: a bounded ask
        n = len(order)
        n_good = max(self.min_points_in_model, int(self.top_n_percent * n / 100))
        n_bad = max(self.min_points_in_model, n - n_good)
        good = impute(vectors[order[:n_good]], self.dims, rng)
        bad = impute(vectors[order[-n_bad:]], self.dims, rng)
        good_kde = KDE(good, self.dims, self.min_bandwidth)
        bad_kde = KDE(bad, self.dims, self.min_bandwidth)
        self.model_budget = budget
        self._models = (key, good_kde, bad_kde)
        return good_kde, bad_kde

    def _best_candidate(self, rng, good: KDE, bad: KDE, pending) -> dict[str, Any] | None:
        candidates = good.sample(rng, self.num_samples, self.bandwidth_factor)
        score = good.log_pdf(candidates) - bad.log_pdf(candidates)        # log l(x)/g(x)
        taken = self.taken(pending)
        for index in np.argsort(-score, kind="stable"):
            if not math.isfinite(score[index]):
                continue
            config = self.space.from_unit(candidates[index])
            if config_key(config) not in taken:
                return config
        return None

    def _fresh_random(self, rng: np.random.Generator, pending) -> dict[str, Any]:
        return self.fresh(rng, pending)


def make_model(space: SearchSpace, model: str, options: Mapping[str, Any], direction: str = "minimize",
               objectives=None, constraints=None, tie_break: str = "hypervolume") -> ConfigSampler:
    """BOHB's config model: 'tpe' (`hpo.search.tpe`), 'gp' (`hpo.search.bohb_gp`) or
    'kde' (the paper's); with several objectives or constraints, the multi-objective TPE of
    `hpo.search.multiobjective.pareto_tpe` (for 'gp' too)."""
    from hpo.search.bohb_gp import GP_ONLY_OPTIONS, GPSampler
    from hpo.search.multiobjective.objectives import Goals
    from hpo.search.tpe import MultiFidelityTPESampler
    goals = Goals.build(objectives, constraints, direction)
    gp_only = sorted(set(options) & GP_ONLY_OPTIONS)
    if gp_only and (model != "gp" or goals.ranked):
        raise ValueError(f"{', '.join(gp_only)}: options of model 'gp' with one objective and no constraint "
                         f"(here model {model!r}" + (", several objectives or constraints)" if goals.ranked else ")"))
    if goals.ranked:
        model = "tpe" if model == "gp" else model      # only the TPE ranks points
        from hpo.search.multiobjective.pareto_tpe import make_pareto_model
        # The points' model keeps per-dimension kernels and uniform first configs
        # (`kernels="auto"` and the Latin hypercube were measured on one objective only).
        return make_pareto_model(space, model, {"kernels": "independent", "initial_design": "uniform", **options},
                                 goals, tie_break)
    models = {"tpe": MultiFidelityTPESampler, "kde": KDESampler, "gp": GPSampler}
    if model not in models:
        raise ValueError(f"model must be one of {sorted(models)}, got {model!r}")
    return models[model](space, **options)


class BOHB(Hyperband):
    """BOHB with synchronous Hyperband scheduling (the paper's). `model`: 'gp' (default: the
    TPE's budget guards, new configs by expected improvement under a Gaussian process among
    the TPE's candidates, joined late in a long search by uniform and local ones,
    `hpo.search.bohb_gp`; a conditional space, one with an unordered
    choice or one with priors keeps the TPE's proposals), 'tpe' (a multi-fidelity TPE that
    learns from every budget, `hpo.search.tpe`) or 'kde' (the paper's KDE on the largest
    budget with enough results). `model_options`
    go to it: for 'kde' min_points_in_model, top_n_percent, num_samples, random_fraction,
    bandwidth_factor, min_bandwidth; for 'tpe' top_n_percent,
    num_samples, random_fraction, min_bandwidth, n_startup, rungs ('reliable' or 'deepest'),
    probe_budgets, kernels ('auto', 'joint' or 'independent'), initial_design ('latin' or
    'uniform'); for 'gp' those and fit_on ('top', 'joint' or 'ranking'), noise (the
    Gaussian process's, on normal scores; None: by the number of rows), candidates
    ('tpe', the default, or 'uniform': what expected improvement chooses among),
    explore_from (30: once the top budget holds that many results, 'tpe' candidates are
    joined by uniform draws and neighbours of the best configs; None: never). With several
    `objectives` or `constraints` the model is `hpo.search.multiobjective.pareto_tpe`'s
    (option `split`).

    `climbers` (model 'gp' or 'tpe', one objective, at least three budgets): the size of the
    climbing bracket, which opens the search in place of the first iteration's full-budget
    bracket (None: the number of top-budget results the rung agreement needs,
    `tpe.MIN_TOP_RESULTS`, at least the full-budget bracket's size; 0: Hyperband's
    full-budget bracket, last in the first iteration too). Later iterations run Hyperband's
    brackets."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, model: str = "gp", objectives=None, constraints=None,
                 tie_break: str = "hypervolume", climbers: int | None = None, **model_options):
        space = SearchSpace.coerce(space)
        goals = dict(objectives=objectives, constraints=constraints, tie_break=tie_break)
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget,
                         eta=eta, sampler=make_model(space, model, model_options, direction=direction, **goals),
                         **goals)
        if climbers is not None and int(climbers) < 0:
            raise ValueError(f"climbers must be >= 0, got {climbers}")
        # The climbing bracket: its configs climb every rung, all promoted whatever they
        # score (each step a continuation, so it costs what starting them at the top costs).
        # Their results at every budget are pairs for the rung agreement
        # (`hpo.search.rung_agreement`, own ranks), so opening the search with it judges
        # every lower budget before Hyperband's aggressive brackets are spent on them; where
        # a budget misleads, its configs are full-budget results, not lost. It runs once:
        # later, the budgets are judged on the results of every bracket, and Hyperband's
        # full-budget bracket serves the model better, since each of its configs is proposed
        # after the previous one's top result, where a climber's arrives only after its whole
        # bracket was proposed.
        self._climb: Bracket | None = None
        # With fewer than three budgets a climbing bracket (6 configs through every rung)
        # would cost more than Hyperband's whole iteration: left out there.
        climbs = self.sampler.judges_budgets and not self.goals.ranked and len(self.brackets) > 2
        if climbers and not climbs:
            # Asked for by name, a climbing bracket that would silently not run is an error.
            raise ValueError(f"climbers={climbers} needs model='gp' (the default) or model='tpe', one objective and no "
                             f"constraint, and at least three budgets (here {len(self.brackets)}: min_budget "
                             f"{min_budget}, max_budget {max_budget}, eta {eta})")
        if climbs:
            from hpo.search.tpe import MIN_TOP_RESULTS
            full = self.brackets[-1]
            n = max(full.rungs[0].n_configs, MIN_TOP_RESULTS) if climbers is None else int(climbers)
            if n:
                budgets = [first.budget for first in (b.rungs[0] for b in self.brackets)]
                self._climb = Bracket(s=full.s, rungs=tuple(Rung(n_configs=n, budget=b) for b in budgets))
                self.sampler.open_with_climb()

    def first_iteration_jobs(self) -> int:
        """How many jobs the first iteration hands out (the climbing bracket that opens it
        included): what Keras Tuner's "one Hyperband iteration" means for this searcher."""
        return sum(rung.n_configs for p in range(len(self.brackets)) for rung in self._plan_at(p).rungs)

    def _plan_at(self, position: int) -> Bracket:
        """The bracket at `position` in the sequence: Hyperband's order, except that the
        climbing bracket opens the first iteration in place of its full-budget bracket (last)."""
        if self._climb is None or position >= len(self.brackets):
            return super()._plan_at(position)
        return self._climb if position == 0 else self.brackets[position - 1]

    def _start_bracket(self):
        # A bracket whose first budget the model does not trust (its ranking disagrees with
        # the top budget's: `MultiFidelityTPESampler.trusted_start`) is skipped: its budget
        # would go to configs judged where the ranking points the wrong way. The climbing
        # and full-budget brackets are always trusted, so one is found within the next
        # 2 * len(brackets) - 1 positions (the first iteration has no full-budget bracket).
        for _ in range(2 * len(self.brackets)):
            plan = self._plan_at(self._brackets_started)
            if plan is self._climb or self.sampler.trusted_start(plan.rungs[0].budget):
                break
            self._brackets_started += 1
        return super()._start_bracket()

    def _job_from(self, run: _BracketRun):
        if run.plan is self._climb and run.rung == 0 and run.to_sample > 0:
            # A climber is proposed as a config that starts at the top (as the full-budget
            # bracket's are): a probe until n_startup configs reached the top, then the model's.
            run.to_sample -= 1
            if self._queue:
                config = self._propose(self.max_budget)
            else:
                # The bracket's earlier climbers count as pending: probes spread over the
                # choices among themselves too (`MultiFidelityTPESampler._spread`).
                pending = [j.config for j in self.pending.values()] + list(run.issued.values())
                config = self.sampler.propose(self.rng, self.max_budget, pending)
            job = self._new_job(config, run.plan.rungs[0].budget, bracket=run.plan.s, rung=0)
            run.issued[job.trial_id] = dict(job.config)
            return job
        return super()._job_from(run)


class AsyncBOHB(AsyncHyperband):
    """BOHB's model with asynchronous Hyperband scheduling: no worker waits at a rung.
    `model` and `model_options` as for `BOHB`, but the default model is 'tpe' ('gp' was
    measured on synchronous brackets, one worker at a time, only: with several workers
    asking at once, its expected improvement has no term for the configs still running,
    where the TPE's draws from l(x) spread them)."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, model: str = "tpe", objectives=None, constraints=None,
                 tie_break: str = "hypervolume", **model_options):
        space = SearchSpace.coerce(space)
        goals = dict(objectives=objectives, constraints=constraints, tie_break=tie_break)
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget,
                         eta=eta, sampler=make_model(space, model, model_options, direction=direction, **goals),
                         **goals)
