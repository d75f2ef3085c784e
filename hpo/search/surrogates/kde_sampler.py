"""The paper's BOHB model (Falkner, Klein and Hutter, ICML 2018; `model="kde"`).

Observations are kept per budget. New configs are modelled on the largest budget that has
at least `min_points_in_model + 2` results: the best `top_n_percent` form l(x), the rest
g(x) (each at least `min_points_in_model` points, as in the paper). `num_samples`
candidates are drawn from l(x) with bandwidths widened by `bandwidth_factor`, and the one
maximising l(x) / g(x) is proposed. A `random_fraction` of proposals stay uniform, which
keeps the convergence guarantee of Hyperband.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from hpo.search.base import ConfigSampler, check_model_options, config_key, optional_count, spread_over_ranking
from hpo.search.surrogates.kde import KDE, dimensions_of, impute
from hpo.space import SearchSpace


class KDESampler(ConfigSampler):
    def __init__(self, space: SearchSpace, *, min_points_in_model: int | None = None, top_n_percent: float = 15,
                 num_samples: int = 64, random_fraction: float = 1 / 3, bandwidth_factor: float = 3.0,
                 min_bandwidth: float = 1e-3):
        super().__init__(space)
        check_model_options(top_n_percent, random_fraction, num_samples)
        self.min_points_in_model = (optional_count("min_points_in_model", min_points_in_model, least=1)
                                    or len(space) + 1)
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
