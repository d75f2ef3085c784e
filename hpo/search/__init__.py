"""Searchers: pure numpy, seeded, ask/tell over any objective. No TensorFlow here.

    from hpo.search import BOHB
    searcher = BOHB(space, min_budget=1, max_budget=27, eta=3, seed=0)
    job = searcher.ask(); searcher.tell(job, 0.42)
"""

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
from hpo.trial import Job, TrialResult, TrialState

__all__ = ["ASHA", "AsyncBOHB", "AsyncHyperband", "BOHB", "KDESampler", "ConfigSampler", "FreezeThaw", "Hyperband",
           "Job", "RandomSearch", "Searcher", "TrialResult", "TrialState", "SEARCHERS", "hyperband_brackets",
           "rung_budgets", "make_searcher"]


# `search.algorithm` names; config validation reads its choices from here.
SEARCHERS: dict[str, type[Searcher]] = {"random": RandomSearch, "hyperband": Hyperband, "asha": ASHA,
                                        "async_hyperband": AsyncHyperband, "bohb": BOHB, "async_bohb": AsyncBOHB,
                                        "freeze_thaw": FreezeThaw}


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
    searcher = SEARCHERS[algorithm](space, **common, **options)
    for config in initial_configs or ():
        searcher.enqueue(config)
    return searcher
