"""Everything a worker needs to train an experiment's trials: data, builder, device."""

from __future__ import annotations

import logging

from hpo.config import Experiment
from hpo.data import load_dataset
from hpo.models import get_builder
from hpo.training.devices import available_devices, enable_memory_growth, select_device
from hpo.training.trainer import Trainer

log = logging.getLogger("hpo.train")


def trainer_for(experiment: Experiment, slot: int = 0) -> Trainer:
    enable_memory_growth()
    device = select_device(experiment.training.device, available_devices(), slot)
    dataset = load_dataset(experiment.data, seed=experiment.seed)
    trainer = Trainer(dataset, get_builder(experiment.model.builder), experiment.training,
                      experiment.model.params, device)
    log.info("training on %s, compile mode %s", device, trainer.mode)
    return trainer
