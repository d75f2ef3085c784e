"""Inputs and targets of several arrays: what a model with several inputs or outputs reads.

A loader's `x` or `y` is one array, or a dict of named arrays (keyed by the model's input or
output names, as Keras's `fit` takes them), or a tuple or list of arrays (in the model's
order). These helpers walk such a structure without TensorFlow (`tf.nest` does the same on
the trainer's side); a list becomes a tuple, so a structure compares and prints one way.
"""

from __future__ import annotations

from typing import Any, Callable


def is_nested(tree: Any) -> bool:
    return isinstance(tree, (dict, tuple, list))


def leaves(tree: Any) -> list:
    """The arrays of `tree` in a fixed order (dict keys sorted, as `tf.nest` orders them)."""
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in leaves(item)]
    return [tree]


def map_tree(fn: Callable[[Any], Any], tree: Any) -> Any:
    """`tree` with `fn` applied to every array, in the same structure (lists as tuples)."""
    if isinstance(tree, dict):
        return {key: map_tree(fn, value) for key, value in tree.items()}
    if isinstance(tree, (tuple, list)):
        return tuple(map_tree(fn, item) for item in tree)
    return fn(tree)


def pack(structure: Any, flat: list) -> Any:
    """`flat` (one value per array of `structure`, in `leaves` order) in `structure`'s shape."""
    values = iter(flat)

    def build(tree: Any) -> Any:
        if isinstance(tree, dict):
            return {key: build(tree[key]) for key in sorted(tree)}
        if isinstance(tree, (tuple, list)):
            return tuple(build(item) for item in tree)
        return next(values)
    return build(structure)


def map_named(fn: Callable[[str, Any], Any], tree: Any, prefix: str = "") -> Any:
    """`tree` with `fn(name, array)` applied to every array, named as `named_leaves` names it."""
    if isinstance(tree, dict):
        return {key: map_named(fn, value, f"{prefix}[{key!r}]") for key, value in tree.items()}
    if isinstance(tree, (tuple, list)):
        return tuple(map_named(fn, item, f"{prefix}[{i}]") for i, item in enumerate(tree))
    return fn(prefix, tree)


def example_shapes(tree: Any) -> Any:
    """One example's shape per array of `tree` (arrays with a leading example dimension)."""
    return map_tree(lambda a: tuple(a.shape[1:]), tree)


def named_leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(a name for the message, the array) per array: `x['price']`, `y[1]`, or the prefix alone."""
    if isinstance(tree, dict):
        return [pair for key in sorted(tree) for pair in named_leaves(tree[key], f"{prefix}[{key!r}]")]
    if isinstance(tree, (tuple, list)):
        return [pair for i, item in enumerate(tree) for pair in named_leaves(item, f"{prefix}[{i}]")]
    return [(prefix, tree)]


def rows(tree: Any) -> int:
    """Examples in `tree`: the leading dimension its arrays share."""
    return len(leaves(tree)[0])
