"""Model builders: `builder(config, input_shape, num_classes) -> keras.Model` returning logits.

Use a registry name (`mlp`, `cnn`) or a custom 'package.module:function' with the same signature.
The registry names its builders by reference, so reading it (as config validation does)
imports no Keras.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

Builder = Callable[[Mapping[str, Any], tuple, int], Any]

BUILDERS: dict[str, str] = {"mlp": "hpo.models.mlp:build_mlp", "cnn": "hpo.models.cnn:build_cnn"}


def get_builder(ref: str) -> Builder:
    from hpo.references import resolve
    return resolve(BUILDERS.get(ref, ref), key="model.builder")
