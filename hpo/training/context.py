"""What the trainer hands its helpers (the epoch loop, fresh weights): a few plain values,
frozen, instead of the trainer itself, so a helper depends on what it reads and on nothing
the trainer does with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hpo.config import TrainingConfig
from hpo.training.training_data import DeviceArrays, StreamedData


@dataclass(frozen=True)
class TrainingContext:
    builder: Callable                      # the experiment's model builder (its `tunable_params` too)
    device: str                            # the TensorFlow device the trainer trains on
    data: DeviceArrays | StreamedData      # the dataset on that device (`hpo.training.training_data`)
    training: TrainingConfig               # the experiment's training settings
    input_shape: Any                       # the builder's arguments besides a trial's params
    num_classes: Any
