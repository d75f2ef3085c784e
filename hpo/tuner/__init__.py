"""The tuner: a Keras model builder searched by hpo's engine (`Tuner`), and the pieces the
Keras Tuner face (`hpo.keras_tuner`) shares with it: `HyperParameters` (what `build_model(hp)`
calls), the space discovery, the trainer of user-compiled models, the results."""

from hpo.tuner.hyperparameters import HyperParameters
from hpo.tuner.tuner import HyperModel, Tuner


def hypermodel(config, input_shape=None, num_classes=None):
    """The builder a tuner's study names: its models come from the script's `build_model`,
    so only the tuner that ran the study builds them (`Tuner.get_best_models`)."""
    raise ValueError("this study's models are built by the build_model of the script that ran it; load them "
                     "with that script's tuner (tuner.get_best_models)")


__all__ = ["HyperModel", "HyperParameters", "Tuner", "hypermodel"]
