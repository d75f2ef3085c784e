"""The closed choices of an experiment, each named once: directions, optimizers, backends,
compile modes and engines.

Validation (`hpo.config`), its error messages, the docs' key table
(`tests/unit/test_docs_contract.py`) and the code that acts on a choice all read these
tables, so adding a choice here is the one edit that makes it valid everywhere. This module
imports nothing, so any layer may read it. The open registries, which also accept a
`package.module:function` of the user's, live with their code: `hpo.data.LOADERS`,
`hpo.models.BUILDERS` and `hpo.search.SEARCHERS`.
"""

DIRECTIONS = ("minimize", "maximize")

# The optimizers the built-in trainer makes (`optimizer` in the space or `training.optimizer`),
# each with its numeric hyperparameters and their defaults (Keras's own). The compiled step
# holds these in variables, so one traced step serves every value (hpo.training.optimizers).
OPTIMIZERS: dict[str, dict[str, float]] = {
    "adam": {"learning_rate": 1e-3, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "adamw": {"learning_rate": 1e-3, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "weight_decay": 0.004},
    "sgd": {"learning_rate": 1e-2, "momentum": 0.0},
    "rmsprop": {"learning_rate": 1e-3, "rho": 0.9, "epsilon": 1e-7},
}

# `execution.backend`, each with the algorithm a search takes when `search.algorithm` is not
# given. BOHB, chosen by measurement on the published benchmarks' tuning set at both budgets
# and on the synthetic suite (README, "Searchers"); its asynchronous form on the parallel
# backends, where several workers would idle at synchronous rung barriers.
BACKENDS: dict[str, str] = {"inline": "bohb", "local": "async_bohb", "dask": "async_bohb"}
DEFAULT_BACKEND = "inline"

# What hpo measures of a trial's model after training (`hpo.training.model_measures`), which
# objectives and constraints may name beside the logged metrics.
MODEL_MEASURES = ("params", "model_bytes", "latency_ms")

COMPILE_MODES = ("auto", "xla", "graph", "eager")     # `training.compile` (hpo.training.compile_mode)
ENGINES = ("auto", "compiled", "fit")                 # `training.engine` (hpo.training.engines)


def default_algorithm(backend: str) -> str:
    """`search.algorithm` when the experiment does not name one."""
    return BACKENDS[backend]
