"""What an executor hands its jobs to: the experiment's `Trainer` on the slot's device, behind
fusion when `training.fuse` asks for it."""

from __future__ import annotations

from hpo.config import Experiment


def trainer_for_experiment(experiment: Experiment, slot: int = 0, known_compile_choices=None, dataset=None):
    """`dataset`: the experiment's data where this process loaded it already (`trainer_for`)."""
    # Imported here, not at the top: the trainer imports TensorFlow, which a worker must
    # configure (threads, devices) first, and `import hpo.executors` stays free of it.
    from hpo.fusion import with_fusion
    from hpo.training.setup import trainer_for
    return with_fusion(trainer_for(experiment, slot, known_compile_choices, dataset), experiment.training.fuse)
