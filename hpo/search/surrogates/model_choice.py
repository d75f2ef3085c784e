"""Which config model a BOHB-family searcher's `model` name means, with its options checked."""

from __future__ import annotations

import inspect
import re
from typing import Any, Mapping

from hpo.errors import did_you_mean
from hpo.search.base import ConfigSampler
from hpo.search.multiobjective.objectives import Goals
from hpo.search.multiobjective.pareto_tpe import make_pareto_model
from hpo.search.surrogates.bohb_gp import GP_ONLY_OPTIONS, GPSampler
from hpo.search.surrogates.kde_sampler import KDESampler
from hpo.search.surrogates.tpe import MultiFidelityTPESampler
from hpo.space import SearchSpace

# BOHB's config models by their `model` name (one objective; several go to the Pareto TPE).
MODELS: dict[str, type[ConfigSampler]] = {"tpe": MultiFidelityTPESampler, "kde": KDESampler, "gp": GPSampler}


def with_resumes(model: str, options: Mapping[str, Any], resumes: bool) -> dict[str, Any]:
    """`options` for `model` where a larger budget does (`resumes`, the default) or does not
    continue a trial's training. With False, 'gp' and 'tpe' start with `probe_budgets=False`,
    since a probe at a budget few configs reached costs that budget in full and never grows
    into a continuation (`hpo.search.bohb.BOHB` has the measurements). Set by name, it stays."""
    if not isinstance(resumes, bool):
        raise ValueError(f"resumes must be True or False, got {resumes!r}")
    if not resumes and model in ("gp", "tpe"):
        return {"probe_budgets": False, **options}
    return dict(options)


def make_model(space: SearchSpace, model: str, options: Mapping[str, Any], direction: str = "minimize",
               objectives=None, constraints=None, tie_break: str = "hypervolume",
               resumes: bool = True, searcher: type | None = None) -> ConfigSampler:
    """BOHB's config model: 'tpe' (`hpo.search.surrogates.tpe`), 'gp' (`hpo.search.surrogates.bohb_gp`) or
    'kde' (the paper's); with several objectives or constraints, the multi-objective TPE of
    `hpo.search.multiobjective.pareto_tpe` (for 'gp' too). `options` start from `with_resumes`'s
    defaults for `resumes`. `searcher`: the class building it, whose keywords a misspelt
    option's did-you-mean also offers."""
    goals = Goals.build(objectives, constraints, direction)
    options = with_resumes(model, options, resumes)
    gp_only = sorted(set(options) & GP_ONLY_OPTIONS)
    if gp_only and (model != "gp" or goals.ranked):
        raise ValueError(f"{', '.join(gp_only)}: options of model 'gp' with one objective and no constraint "
                         f"(here model {model!r}" + (", several objectives or constraints)" if goals.ranked else ")"))
    if goals.ranked:
        model = "tpe" if model == "gp" else model      # only the TPE ranks points
        # The points' model keeps per-dimension kernels and uniform first configs
        # (`kernels="auto"` and the Latin hypercube were measured on one objective only).
        return make_pareto_model(space, model, {"kernels": "independent", "initial_design": "uniform", **options},
                                 goals, tie_break)
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    try:
        return MODELS[model](space, **options)
    except TypeError as exc:
        # Python's message would name the model's class, which the user never wrote: what
        # reaches the model is every keyword the searcher did not take itself.
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if unknown is None:
            raise
        name = unknown.group(1)
        known = set(inspect.signature(MODELS[model]).parameters)
        if searcher is not None:        # the class building the model: its own keywords
            known |= set(inspect.signature(searcher).parameters)
        raise TypeError(f"got an unexpected keyword argument {name!r}: neither the searcher's nor its "
                        f"{model!r} model's{did_you_mean(name, sorted(known))}") from None
