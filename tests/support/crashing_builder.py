"""A model builder that kills its own process for one config: a stand-in for a worker
taken down by the OOM killer or a native crash."""

import os

from hpo.models.mlp import build_mlp

# A dropout no draw from a continuous range hits: only a config enqueued with it crashes.
CRASHING_DROPOUT = 0.123


def build(config, input_shape, num_classes):
    if float(config.get("dropout", 0.0)) == CRASHING_DROPOUT:
        os._exit(9)
    return build_mlp(config, input_shape, num_classes)
