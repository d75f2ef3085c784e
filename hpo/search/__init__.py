"""Searchers: pure numpy, seeded, ask/tell over any objective. No TensorFlow here.

    from hpo.search import BOHB
    searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0)
    job = searcher.ask(); searcher.tell(job, 0.42)
"""

import inspect
import re

from hpo.search.asha import ASHA
from hpo.search.async_bohb import AsyncBOHB
from hpo.search.async_hyperband import AsyncHyperband
from hpo.search.base import ConfigSampler, Searcher
from hpo.search.bohb import BOHB
from hpo.search.freeze_thaw import FreezeThaw
from hpo.search.hyperband import Hyperband
from hpo.search.random_search import RandomSearch
from hpo.search.schedule import hyperband_brackets, rung_budgets
from hpo.search.surrogates.kde_sampler import KDESampler
from hpo.search.surrogates.model_choice import MODELS
from hpo.trial import Job, TrialResult, TrialState

__all__ = ["ASHA", "AsyncBOHB", "AsyncHyperband", "BOHB", "KDESampler", "ConfigSampler", "FreezeThaw", "Hyperband",
           "Job", "RandomSearch", "Searcher", "TrialResult", "TrialState", "SEARCHERS", "hyperband_brackets",
           "rung_budgets", "make_searcher", "option_names", "UnknownOption"]


# `search.algorithm` names; config validation reads its choices from here.
SEARCHERS: dict[str, type[Searcher]] = {"random": RandomSearch, "hyperband": Hyperband, "asha": ASHA,
                                        "async_hyperband": AsyncHyperband, "bohb": BOHB, "async_bohb": AsyncBOHB,
                                        "freeze_thaw": FreezeThaw}


class UnknownOption(TypeError):
    """A keyword `algorithm` (and its config model) does not take: `name`, and the names it
    takes (`option_names`), for each face to say in its own terms."""

    def __init__(self, algorithm: str, name: str, accepted: list[str]):
        super().__init__(f"{algorithm} got an unexpected keyword argument {name!r}; it takes {', '.join(accepted)}")
        self.algorithm, self.name, self.accepted = algorithm, name, accepted


def make_searcher(algorithm: str, space, *, seed: int, direction: str, min_budget: float,
                  max_budget: float, eta: float, options=None, initial_configs=(), objectives=None,
                  constraints=None) -> Searcher:
    """Build a searcher by its config name (`search.algorithm`), with `initial_configs`
    (`search.initial_configs`) enqueued to run first; `objectives` and `constraints` (None:
    the searcher's single objective) are passed on only when given."""
    options = dict(options or {})
    if objectives is not None:
        options["objectives"] = objectives
    if constraints:
        options["constraints"] = constraints
    common = dict(seed=seed, direction=direction, min_budget=min_budget, max_budget=max_budget, eta=eta)
    if algorithm not in SEARCHERS:
        raise ValueError(f"unknown algorithm {algorithm!r}; expected one of {sorted(SEARCHERS)}")
    try:
        searcher = SEARCHERS[algorithm](space, **common, **options)
    except TypeError as exc:
        # Python's own message for a name the searcher lacks (or the model's, `make_model`).
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc))
        if unknown is None:
            raise
        raise UnknownOption(algorithm, unknown.group(1), option_names(algorithm, options)) from None
    for config in initial_configs or ():
        searcher.enqueue(config)
    return searcher


# What every searcher takes from `search:`'s own keys, never from `search.options`.
_SCHEDULE_KEYS = {"self", "space", "seed", "direction", "min_budget", "max_budget", "eta", "sampler",
                  "objectives", "constraints"}


def option_names(algorithm: str, options=None) -> list[str]:
    """The names `search.options` may hold for `algorithm`: its own keyword arguments and, for
    the BOHB family, those of the config model that `options`' `model` (or the default) names;
    for messages that say what an unknown option could have been."""
    init = SEARCHERS[algorithm].__init__
    names, forwarded = _keywords(init)
    if forwarded == "model_options":
        model = dict(options or {}).get("model", inspect.signature(init).parameters["model"].default)
        if model in MODELS:
            names |= _model_keywords(MODELS[model])
    elif forwarded:      # the base Searcher's goals: tie_break, beside objectives and constraints
        names |= _keywords(Searcher.__init__)[0]
    return sorted(names)


def _keywords(function) -> tuple[set[str], str | None]:
    """`function`'s keyword-only arguments that `search.options` can set, and the name of its
    **kwargs (None without)."""
    params = inspect.signature(function).parameters.values()
    names = {p.name for p in params if p.kind == p.KEYWORD_ONLY and p.name not in _SCHEDULE_KEYS}
    return names, next((p.name for p in params if p.kind == p.VAR_KEYWORD), None)


def _model_keywords(model: type) -> set[str]:
    """A config model's keyword arguments, its base classes' included where it passes them on."""
    names: set[str] = set()
    for klass in model.__mro__:
        if "__init__" in vars(klass):
            own, forwarded = _keywords(vars(klass)["__init__"])
            names |= own
            if forwarded is None:
                break
    return names
