"""A model builder that kills its own process for one config: a stand-in for a worker
taken down by the OOM killer or a native crash."""

import os

from hpo.models.mlp import build_mlp


def build(config, input_shape, num_classes):
    if int(config.get("units", 0)) == 13:
        os._exit(9)
    return build_mlp(config, input_shape, num_classes)
