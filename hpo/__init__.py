"""hpo: hyperparameter optimisation for TensorFlow/Keras.

The package root stays import-light (no TensorFlow) so `hpo.optimize` and `hpo.search`
work for any objective.
"""

from hpo.optimization import OptimizeResult, optimize

__version__ = "0.1.0"
__all__ = ["OptimizeResult", "optimize"]
