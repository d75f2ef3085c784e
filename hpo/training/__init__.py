"""Keras training engine. Imports TensorFlow; knows nothing about searchers."""

from hpo.training.task import EpochReport, TrainTask

__all__ = ["EpochReport", "TrainTask"]
