"""hpo: hyperparameter optimisation for TensorFlow/Keras.

The package root stays import-light (no TensorFlow) so `hpo.search` works for any objective.
"""

__version__ = "0.1.0"
