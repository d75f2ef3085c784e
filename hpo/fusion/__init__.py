"""Fused trials (after HFTA, Wang et al., MLSys 2021): K trials of one architecture trained
by one compiled program. Sits above `hpo.training`, which knows nothing of it.

`with_fusion(trainer, fuse)` gives the object executors hand their jobs to: the trainer
itself for `training.fuse: 1`, else a `FusingTrainer` around it. Both offer
`run_group(tasks) -> events`.
"""

from __future__ import annotations


def with_fusion(trainer, fuse: int | str):
    if fuse == 1 or fuse == "1":
        return trainer
    from hpo.fusion.group_trainer import FusingTrainer
    return FusingTrainer(trainer, fuse)


__all__ = ["with_fusion"]
