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
    """The builder `ref` names, returning built models (`built`)."""
    import functools

    from hpo.references import resolve
    builder = resolve(BUILDERS.get(ref, ref), key="model.builder")

    @functools.wraps(builder)
    def build(config, input_shape, num_classes):
        return built(builder(config, input_shape, num_classes), input_shape)
    return build


def built(model, input_shape):
    """`model`, with its weights: a subclassed `keras.Model` (or a `Sequential` without an
    `Input`) has none until it is first called, and the trainer reads and sets them before
    any step. It is called once, `training=False`, on float32 symbolic inputs of the loader's
    shapes (one array, or a tuple or dict of them, nested), which computes nothing. Anything
    else is returned as it is."""
    if getattr(model, "built", True) or not callable(model):
        return model
    inputs = _symbolic_inputs(input_shape)
    try:
        model(inputs, training=False)     # Keras leaves `training` out for a call that takes none
    except Exception as exc:
        raise ValueError(f"the builder returned a {type(model).__name__} that is not built, and calling it on "
                         f"keras.Input of the data's shape {input_shape} failed ({type(exc).__name__}: {exc}); "
                         f"expected a built model: call it once, or give it an Input, in the builder") from exc
    return model


def _symbolic_inputs(shape, name: str | None = None):
    """A `keras.Input` per array of `shape`: one shape, or a dict, tuple or list of them, nested."""
    import keras

    if isinstance(shape, dict):
        return {key: _symbolic_inputs(value, key) for key, value in shape.items()}
    if isinstance(shape, (tuple, list)) and any(isinstance(d, (tuple, list, dict)) for d in shape):
        return [_symbolic_inputs(value) for value in shape]
    return keras.Input(tuple(shape), name=name)
