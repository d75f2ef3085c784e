"""Asynchronous BOHB: BOHB's config model (`hpo.search.surrogates`) on asynchronous
Hyperband's schedule (`hpo.search.async_hyperband`), so no worker waits at a rung barrier. It
skips candidates equal to a pending or already evaluated config."""

from __future__ import annotations

from hpo.search.async_hyperband import AsyncHyperband
from hpo.search.multiobjective.objectives import Goals
from hpo.search.surrogates.bohb_gp import THOMPSON_FROM
from hpo.search.surrogates.model_choice import make_model
from hpo.space import SearchSpace

# How proposals made while configs are pending keep away from them: many workers asking at
# once otherwise crowd around one peak of a model that has none of their results. The local
# penalty (`hpo.search.surrogates.tpe`, `batch`, with its scale 3 and share 0.5) on the TPE's
# l(x) / g(x) or on the Gaussian process's expected improvement, and the process's Thompson
# draws from THOMPSON_FROM configs pending on (`hpo.search.surrogates.bohb_gp`). Measured on 4
# to 256 simulated workers: benchmarks/notes/many_workers.md ("The pending penalty", "The
# Gaussian process on many workers", "Thompson draws").
KEEP_AWAY = {"tpe": {"batch": "penalty"}, "gp": {"batch": "penalty", "thompson_from": THOMPSON_FROM}}


class AsyncBOHB(AsyncHyperband):
    """BOHB's model with asynchronous Hyperband scheduling: no worker waits at a rung.
    `model` and `model_options` as for `BOHB`, with its default model, 'gp' (on 4 to 256
    simulated workers it ended the window at 0.21-0.63 of the TPE's regret; it trailed the TPE
    at a quarter of the window on 64 and 256 workers, and on one problem of six with one worker:
    benchmarks/notes/many_workers.md, "The Gaussian process at every worker count"), and the
    proposals keep away from the configs still running (`KEEP_AWAY`, with model 'gp' or
    'tpe', one objective and no constraint: half of them by a local penalty, and with 'gp'
    every one by a Thompson draw from THOMPSON_FROM configs pending on; `batch="argmax"` turns
    both off; `thompson_from=None` keeps the penalty at every count). `resumes` as for
    `BOHB`: with False (each budget trains afresh, so a promotion costs its whole budget) the
    model starts no random probes at the budgets few configs reached; the schedule is the same.
    `seed`, `direction`, `min_budget`, `max_budget`, `eta`, `objectives`, `constraints` and
    `tie_break` as `Searcher`'s."""

    def __init__(self, space, *, seed: int = 0, direction: str = "minimize", min_budget: float = 1.0,
                 max_budget: float = 27.0, eta: float = 3.0, model: str = "gp", objectives=None, constraints=None,
                 tie_break: str = "hypervolume", resumes: bool = True, **model_options):
        space = SearchSpace.coerce(space)
        if model in KEEP_AWAY and not Goals.build(objectives, constraints, direction).ranked:
            defaults = dict(KEEP_AWAY[model])
            if model_options.get("batch") == "argmax":      # it turns the draws off too
                defaults.pop("thompson_from", None)
            model_options = {**defaults, **model_options}     # the Pareto TPE ranks points: not measured
        goals = dict(objectives=objectives, constraints=constraints, tie_break=tie_break)
        super().__init__(space, seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget,
                         eta=eta, sampler=make_model(space, model, model_options, direction=direction, resumes=resumes,
                                                     searcher=type(self), **goals),
                         **goals)
        self.resumes = resumes

    @property
    def promotions_continue(self) -> bool:
        return self.resumes
