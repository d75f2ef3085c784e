"""The experiment's typed sections: frozen dataclasses whose field defaults are the only
place an experiment's defaults are written (validation reads them; `docs/ARCHITECTURE.md`'s
key table is checked against them). The `data` section, `DataConfig`, is defined in
`hpo.data.settings`, below this layer, where the loading that reads it lives."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from hpo import metric_names
from hpo.data.settings import DataConfig
from hpo.registry import DEFAULT_BACKEND, DEFAULT_OPTIMIZER, LEARNING_RATE, default_algorithm
from hpo.search.multiobjective.objectives import Goals
from hpo.space import SearchSpace


@dataclass(frozen=True)
class ModelConfig:
    builder: str = "mlp"
    params: Mapping[str, Any] = field(default_factory=dict)   # fixed builder arguments


@dataclass(frozen=True)
class SearchConfig:
    algorithm: str = default_algorithm(DEFAULT_BACKEND)     # validation takes the backend's own default
    objective: str = "val_accuracy"
    direction: str = "maximize"
    min_budget: float = 1.0
    max_budget: float = 27.0
    eta: float = 3.0
    max_trials: int | None = 50
    time_limit: float | None = None   # seconds
    # Epochs the whole search trains, a continued promotion counting those it adds; the searcher
    # plans its brackets for it where it can (`Searcher.plans_total_budget`).
    total_budget: float | None = None
    max_consecutive_failures: int = 10
    options: Mapping[str, Any] = field(default_factory=dict)  # algorithm-specific settings
    initial_configs: tuple[Mapping[str, Any], ...] = ()      # run first, before any proposed config
    # Several objectives ({name, direction} each; empty: `objective` alone) and constraints
    # ("params <= 20000"); names are checked by the pre-flight (hpo.driver.preflight).
    objectives: tuple[Mapping[str, str], ...] = ()
    constraints: tuple[str, ...] = ()

    def goals(self) -> Goals:
        """The objectives (`objectives`, else `objective` alone) and constraints, as the
        searchers take them (`hpo.search.multiobjective.objectives.Goals`)."""
        return Goals.of_search(self.objectives, self.objective, self.direction, self.constraints)

    @property
    def goal_names(self) -> tuple[str, ...]:
        """Every name an objective or constraint reads."""
        return self.goals().required_names


FUSE_AUTO_CEILING = 32     # the most jobs `training.fuse: auto` takes in flight and fuses


@dataclass(frozen=True)
class EarlyStoppingConfig:
    """`training.early_stopping`: stop a trial once `monitor` has not improved by more than
    `min_delta` for `patience` epochs in a row (its direction as `search.direction` infers it)."""
    monitor: str = "val_loss"
    patience: int = 3
    min_delta: float = 0.0


@dataclass(frozen=True)
class TrainingConfig:
    compile: str = "auto"
    device: str = "auto"
    batch_size: int = 64              # used when the space has no batch_size
    optimizer: str = DEFAULT_OPTIMIZER   # used when the space has no optimizer
    learning_rate: float = LEARNING_RATE   # used when the space has no learning_rate
    steps_per_call: int = 32          # training steps per compiled call (amortises dispatch)
    checkpoint_every: int = 1         # epochs between progress checkpoints (0: only at the end)
    checkpoint_seconds: float = 10.0  # ...and at least this much training between them
    fuse: int | str = 1               # trials of one architecture trained as one program (per worker), or 'auto'
    # A Keras loss identifier or 'package.module:function'; several outputs: one for all, or {output: loss}.
    loss: str | Mapping[str, str] = metric_names.DEFAULT_LOSS
    # Keras metric identifiers or references; several outputs: one list for all, or {output: [metrics]}.
    metrics: tuple[str, ...] | Mapping[str, tuple[str, ...]] = metric_names.DEFAULT_METRICS
    engine: str = "auto"              # 'compiled', 'fit' (Keras's model.fit) or 'auto' (hpo.training.engines)
    callbacks: tuple[str, ...] = ()   # 'package.module:function' references, each returning a Keras callback
    early_stopping: EarlyStoppingConfig | None = None
    latency_batch: int = 1            # batch size of the forward pass `latency_ms` times
    # A trial is scored by its best epoch (not its last) and that epoch's weights are its model:
    # Keras Tuner's rule. Promotions still continue from the last epoch's state.
    keep_best_epoch: bool = False

    def trial_params(self, fixed_params: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's resolved parameters, what its model and optimizer are built from: its
        config over the model's fixed params (`model.params`) over the training defaults
        (`batch_size`, `optimizer`, `learning_rate`)."""
        defaults = {"batch_size": self.batch_size, "optimizer": self.optimizer, "learning_rate": self.learning_rate}
        return {**defaults, **dict(fixed_params), **dict(config)}

    @property
    def class_labels(self) -> bool:
        """The loss reads the labels as class indices 0..K-1 (the default loss does; given per
        output, when every output's loss is it)."""
        return metric_names.reads_class_indices(self.loss)

    @property
    def jobs_per_trainer(self) -> int:
        """Jobs an executor hands each trainer at once: a fused group forms from them (`auto`
        sizes its groups later, up to `FUSE_AUTO_CEILING`)."""
        return FUSE_AUTO_CEILING if self.fuse == "auto" else max(1, int(self.fuse))


@dataclass(frozen=True)
class ExecutionConfig:
    backend: str = DEFAULT_BACKEND
    workers: int | str = "auto"
    scheduler: str | None = None      # dask: a scheduler address; None starts a LocalCluster
    max_retries: int = 2              # attempts after the first when a worker dies mid-trial
    recycle_after: int = 100          # local: trials per worker process before a fresh one


@dataclass(frozen=True)
class OutputConfig:
    dir: str | None = None            # default: runs/<name>


@dataclass(frozen=True)
class Experiment:
    name: str
    seed: int
    data: DataConfig | None          # None: the trials bring their own data (`hpo.optimize`)
    model: ModelConfig
    space: SearchSpace
    search: SearchConfig
    training: TrainingConfig
    execution: ExecutionConfig
    output: OutputConfig
    source: str = "<dict>"

    def trial_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """A trial's resolved parameters (`TrainingConfig.trial_params`)."""
        return self.training.trial_params(self.model.params, config)

    @property
    def study_dir(self) -> Path:
        return Path(self.output.dir or f"runs/{self.name}")

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able form; also what the study stores and compares on resume."""
        out: dict[str, Any] = {"name": self.name, "seed": self.seed}
        for section in ("data", "model", "search", "training", "execution", "output"):
            value = getattr(self, section)
            out[section] = None if value is None else _plain(dataclasses.asdict(value))
        out["space"] = self.space.to_dict()
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


