"""The closed choices of an experiment, each named once: directions, optimizers, backends,
compile modes and engines.

Validation (`hpo.config`), its error messages, the docs' key table
(`tests/unit/test_docs_contract.py`) and the code that acts on a choice all read these
tables, so adding a choice here is the one edit that makes it valid everywhere. This module
imports nothing of hpo's (the standard library only), so any layer may read it. The open registries, which also accept a
`package.module:function` of the user's, live with their code: `hpo.data.LOADERS`,
`hpo.models.BUILDERS` and `hpo.search.SEARCHERS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

DIRECTIONS = ("minimize", "maximize")

# `training.learning_rate`'s default, and every optimizer's when a trial names none.
LEARNING_RATE = 1e-3


@dataclass(frozen=True)
class Structural:
    """A structural key of an optimizer: the type its value is read as (a trial's value and
    the default alike) and its default."""

    type: type
    default: Any

    def __post_init__(self) -> None:
        if not isinstance(self.default, self.type):
            raise TypeError(f"a structural key's default {self.default!r} is not a {self.type.__name__}")

    def read(self, value: Any) -> Any:
        return self.type(value)


@dataclass(frozen=True)
class OptimizerRecord:
    """One optimizer the built-in trainer makes (`optimizer` in the space or
    `training.optimizer`): the class in `keras.optimizers` it trains as (and that
    `hpo best --export` saves, and that a Keras Tuner script's compiled model names), its
    numeric hyperparameters with their defaults, and its structural keys with their types
    and defaults.

    The compiled step holds the numeric hyperparameters in variables, so one traced step
    serves every value (`hpo.training.optimizers`). Keras branches on the structural keys in
    Python (SGD's `nesterov`, RMSprop's `momentum` > 0), so they go into the architecture
    signature instead: trials that differ in them train different programs."""

    keras_class: str
    hyperparameters: Mapping[str, float]
    structural: Mapping[str, Structural]

    @property
    def consumed_keys(self) -> frozenset[str]:
        """Every parameter the optimizer consumes (none belongs to a model's architecture)."""
        return frozenset(self.hyperparameters) | frozenset(self.structural)

    @property
    def structural_defaults(self) -> dict[str, Any]:
        return {key: key_type.default for key, key_type in self.structural.items()}

    def structural_values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The structural keys' values in `params` (their defaults where absent), each read as
        its key's type: `nesterov` a bool, RMSprop's `momentum` a float."""
        return {key: key_type.read(params.get(key, key_type.default)) for key, key_type in self.structural.items()}


# The defaults are Keras's own, but for the learning rate, which is the experiment's
# (`LEARNING_RATE`) for every optimizer.
OPTIMIZERS: dict[str, OptimizerRecord] = {
    "adam": OptimizerRecord("Adam", {"learning_rate": LEARNING_RATE, "beta_1": 0.9, "beta_2": 0.999,
                                     "epsilon": 1e-7}, {}),
    "adamw": OptimizerRecord("AdamW", {"learning_rate": LEARNING_RATE, "beta_1": 0.9, "beta_2": 0.999,
                                       "epsilon": 1e-7, "weight_decay": 0.004}, {}),
    "sgd": OptimizerRecord("SGD", {"learning_rate": LEARNING_RATE, "momentum": 0.0},
                           {"nesterov": Structural(bool, False)}),
    "rmsprop": OptimizerRecord("RMSprop", {"learning_rate": LEARNING_RATE, "rho": 0.9, "epsilon": 1e-7},
                               {"momentum": Structural(float, 0.0)}),
}
# The range each setting a trial's trainer reads takes, inclusive (None: no bound): the batch
# size and every numeric optimizer hyperparameter, whether `training.*`, the space or
# `model.params` sets it. Outside it a trial fails mid-search (a batch of 0) or trains
# nonsense without an error (a negative learning rate ascends; Keras refuses SGD's momentum
# outside [0, 1], a check hpo's variable-held hyperparameters bypass).
TRAINER_RANGES: dict[str, tuple[float, float | None]] = {
    "batch_size": (1, None), "learning_rate": (0, None), "momentum": (0, 1), "beta_1": (0, 1), "beta_2": (0, 1),
    "rho": (0, 1), "epsilon": (0, None), "weight_decay": (0, None)}
assert all(key in TRAINER_RANGES for record in OPTIMIZERS.values() for key in record.hyperparameters), \
    "every optimizer hyperparameter has a range"
# `training.optimizer`'s default: the optimizer a trial trains with when neither its config
# nor the experiment names one.
DEFAULT_OPTIMIZER = "adam"
# Parameters the optimizers consume: none of them belongs in a model's architecture.
OPTIMIZER_PARAMS = frozenset({"optimizer"}).union(*(record.consumed_keys for record in OPTIMIZERS.values()))

# `execution.backend`, each with the algorithm a search takes when `search.algorithm` is not
# given. BOHB, chosen by measurement on the published benchmarks' tuning set at both budgets
# and on the synthetic suite (README, "What each part does, and its limits"); its asynchronous form on the parallel
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
