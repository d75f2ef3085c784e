"""What the trainer hands its helpers (the epoch loop, fresh weights, fused trials): a few
plain values, frozen, instead of the trainer itself, so a helper depends on what it reads and
on nothing the trainer does with them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from hpo.config import TrainingConfig
from hpo.training.training_data import DeviceArrays, StreamedData


@dataclass(frozen=True)
class TrainingContext:
    """One trainer's fixed surroundings: the model builder and the two arguments it takes
    besides a trial's params (`builder(params, input_shape, num_classes)`), the device, the
    data on that device and the experiment's training settings. Every build of a model,
    real or stateless, reads the builder's arguments from here."""

    builder: Callable                      # the experiment's model builder (its `tunable_params` too)
    device: str                            # the TensorFlow device the trainer trains on
    data: DeviceArrays | StreamedData      # the dataset on that device (`hpo.training.training_data`)
    training: TrainingConfig               # the experiment's training settings
    # One example's input shape, (28, 28); for several inputs, one shape per input array in
    # the inputs' structure, a dict or a tuple (`hpo.data.Dataset.input_shape`).
    input_shape: tuple | dict | list
    # The targets' classes, an int; for several outputs, one count per target array in the
    # targets' structure (`hpo.data.Dataset.num_classes`).
    num_classes: int | dict | tuple | list
