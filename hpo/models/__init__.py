"""Model builders: `builder(config, input_shape, num_classes) -> keras.Model` returning logits.

Use a registry name (`mlp`, `cnn`) or a custom 'package.module:function' with the same signature.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from hpo.models.cnn import build_cnn
from hpo.models.mlp import build_mlp

Builder = Callable[[Mapping[str, Any], tuple, int], Any]

BUILDERS: dict[str, Builder] = {"mlp": build_mlp, "cnn": build_cnn}


def get_builder(ref: str) -> Builder:
    from hpo.references import resolve
    return resolve(ref, BUILDERS, key="model.builder")
