"""Keras training engine. Imports TensorFlow; knows nothing about searchers."""

from hpo.training.task import EpochReport, TrainTask
from hpo.training.xla_fusion import request_multi_output_fusion

request_multi_output_fusion()      # before this process's first XLA compilation reads XLA_FLAGS

__all__ = ["EpochReport", "TrainTask"]
