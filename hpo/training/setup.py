"""Everything a worker needs to train an experiment's trials: data, builder, device."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from hpo.config import Experiment
from hpo.data import Dataset, announce_data, load_dataset
from hpo.models import get_builder
from hpo.training.devices import available_devices, enable_memory_growth, select_device
from hpo.training.trainer import Trainer

log = logging.getLogger("hpo.train")


def trainer_for(experiment: Experiment, slot: int = 0,
                known_compile_choices: Mapping[str, tuple[str, Mapping[str, Any]]] | None = None,
                dataset: Dataset | None = None) -> Trainer:
    """`known_compile_choices`: the study's compile-mode decisions so far (`compile: auto`).
    `dataset`: the experiment's data, where this process has loaded it already (the pre-flight's)."""
    enable_memory_growth()
    device = select_device(experiment.training.device, available_devices(), slot)
    if dataset is None:
        dataset = load_dataset(experiment.data, seed=experiment.seed, class_labels=experiment.training.class_labels)
    else:
        announce_data(dataset)
    trainer = Trainer(dataset, get_builder(experiment.model.builder), experiment.training,
                      experiment.model.params, device, known_compile_choices=known_compile_choices)
    log.info("training on %s, compile mode %s", device,
             "measured per architecture" if trainer.mode == "auto" else trainer.mode)
    return trainer
