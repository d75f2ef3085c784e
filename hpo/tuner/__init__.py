"""The tuner: a Keras model builder searched by hpo's engine (`Tuner`), and the pieces the
Keras Tuner face (`hpo.keras_tuner`) shares with it: `HyperParameters` (what `build_model(hp)`
calls), the space discovery, the trainer of user-compiled models, the results.

`hpo.tuner.hyperparameters`, `hpo.tuner.discovery` and `hpo.tuner.keras_tuner_terms` (the
conversion of Keras Tuner's parameters, which `hpo.keras_tuner.oracles` reads too) import no
TensorFlow; `Tuner` does.
"""

from hpo.tuner.hyperparameters import HyperParameters


def hypermodel(config, input_shape=None, num_classes=None):
    """The builder a tuner's study names: its models come from the script's `build_model`,
    so only the tuner that ran the study builds them (`Tuner.get_best_models`)."""
    raise ValueError("this study's models are built by the build_model of the script that ran it; load them "
                     "with that script's tuner (tuner.get_best_models)")


def __getattr__(name: str):
    if name in ("Tuner", "HyperModel"):
        from hpo.tuner import tuner
        return getattr(tuner, name)
    raise AttributeError(f"module 'hpo.tuner' has no attribute {name!r}")


__all__ = ["HyperModel", "HyperParameters", "Tuner", "hypermodel"]
