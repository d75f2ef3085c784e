"""hpo: hyperparameter optimisation for TensorFlow/Keras.

The package root stays import-light (no TensorFlow) so `hpo.optimize` and `hpo.search`
work for any objective.
"""

from hpo.objective.optimization import OptimizeResult, optimize
from hpo.objective.simulation import Simulation

__version__ = "0.1.0"
__all__ = ["OptimizeResult", "Simulation", "Tuner", "optimize"]


def __getattr__(name: str):
    # `hpo.Tuner` (a Keras model builder searched by hpo's engine) imports TensorFlow: only when asked for.
    if name == "Tuner":
        from hpo.tuner.tuner import Tuner
        return Tuner
    raise AttributeError(f"module 'hpo' has no attribute {name!r}")
