"""A loader's split as a checked `StreamedSplit`: elements read in batches, never gathered whole.

What can be checked from the element spec is (pairs, unbatched, numeric, one input shape);
what needs values is checked on the first batch. A split whose length tf.data does not know
(a generator) is counted in one pass of bounded memory, which also checks every value is
finite and, for integer labels, finds the number of classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpo.data.checks import check_arrays
from hpo.data.dataset import StreamedSplit, classes_of
from hpo.data.nested import example_shapes, map_tree, named_leaves, rows

_READ_BATCH = 1024        # elements per read in the counting pass and the first-batch check...
_READ_BYTES = 8 * 2 ** 20  # ...or fewer, so that one read holds at most this much input


def as_stream(value: Any, name: str, bad, class_labels: bool, count_classes: bool,
              limit: int | None = None) -> tuple[StreamedSplit, Any]:
    """(the split as a stream, its number of classes when `count_classes`, else None). Inputs
    and targets may each be a dict or tuple of tensors (several model inputs or outputs): the
    classes are then counted per target tensor, in the targets' structure."""
    import tensorflow as tf


    if not isinstance(value, tf.data.Dataset):
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise bad(f"is {type(value).__name__}; expected (x, y) arrays or a tf.data.Dataset of (x, y) "
                      f"elements", name)
        x, y = check_arrays(value[0], value[1], bad, class_labels, name)
        if limit is not None:
            x, y = map_tree(lambda a: a[:limit], x), map_tree(lambda a: a[:limit], y)
        elements = tf.data.Dataset.from_tensor_slices((x, y))
        stream = StreamedSplit(elements, rows(x), example_shapes(x),
                               example_shapes(y), map_tree(lambda a: str(a.dtype), y))
        return stream, (classes_of([y]) if count_classes else None)
    x_spec, y_spec = _pair_specs(value, name, bad)
    target_dtype = tf.nest.map_structure(lambda s: _target_dtype(s, class_labels, name, bad), y_spec)
    if limit is not None:
        value = value.take(limit)
    examples = int(value.cardinality())
    if examples == tf.data.INFINITE_CARDINALITY:
        raise bad("is infinite (a .repeat() without a count?); expected a finite dataset: hpo iterates it "
                  "once per epoch", name)
    shapes = {"input_shape": map_tree(lambda s: tuple(s.shape), x_spec),
              "target_shape": map_tree(lambda s: tuple(s.shape), y_spec), "target_dtype": target_dtype}
    stream = StreamedSplit(value, max(examples, 0), **shapes)
    first = next(iter(value.batch(read_batch(x_spec))), None)
    if first is not None:
        _check_values(*first, name, bad, class_labels)
    classes = None
    int_targets = any(d == "int32" for d in tf.nest.flatten(target_dtype))
    if examples == tf.data.UNKNOWN_CARDINALITY or (count_classes and int_targets):
        examples, classes = _count(stream, name, bad, class_labels)
        stream = StreamedSplit(value, examples, **shapes)
    if examples == 0:
        raise bad("has no elements", name)
    if count_classes and classes is None:
        classes = tf.nest.map_structure(lambda s: int(s.shape[0]) if s.shape.rank == 1 else 1, y_spec)
    return stream, classes


def _pair_specs(value, name: str, bad) -> tuple[Any, Any]:
    import tensorflow as tf

    spec = value.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2
            and all(isinstance(s, tf.TensorSpec) for s in tf.nest.flatten(spec))):
        raise bad(f"has elements {spec}; expected (x, y) pairs of tensors (each a tensor, or a dict or tuple of "
                  f"tensors)", name)
    x_spec, y_spec = spec
    first_x = tf.nest.flatten(x_spec)[0]
    for y_leaf in tf.nest.flatten(y_spec):
        if y_leaf.shape.rank and y_leaf.shape[0] is None:
            raise bad(f"has elements of shape {first_x.shape} with targets {y_leaf.shape}, which look batched; "
                      f"expected unbatched (x, y) elements (hpo batches each trial by its batch_size): drop the "
                      f".batch()", name)
    for x_leaf in tf.nest.flatten(x_spec):
        if x_leaf.shape.rank is None or not x_leaf.shape.is_fully_defined():
            raise bad(f"has inputs of shape {x_leaf.shape}; expected every input to have one known shape", name)
        if not (x_leaf.dtype.is_floating or x_leaf.dtype.is_integer or x_leaf.dtype.is_bool):
            raise bad(f"has non-numeric inputs (dtype {x_leaf.dtype.name}); expected numbers", name)
    return x_spec, y_spec


def _target_dtype(y_spec, class_labels: bool, name: str, bad) -> str:
    numeric = y_spec.dtype.is_floating or y_spec.dtype.is_integer or y_spec.dtype.is_bool
    rank = y_spec.shape.rank
    if not numeric or rank is None or rank > (0 if class_labels else 1):
        expected = "class index 0..K-1" if class_labels else "target (a value, or a row of K values)"
        raise bad(f"has targets of shape {y_spec.shape} and dtype {y_spec.dtype.name}; expected one {expected} "
                  f"per element", name)
    if class_labels or not y_spec.dtype.is_floating:
        return "int32"
    return "float32"


def _check_values(x, y, name: str, bad, class_labels: bool, offset: int = 0) -> None:
    """Finite inputs and targets in one read batch (`x`, `y`: tensors, or dicts or tuples of them)."""
    import tensorflow as tf


    for array_name, x_leaf in named_leaves(tf.nest.map_structure(np.asarray, x), "x"):
        x_leaf = x_leaf.astype("float32")
        finite = np.isfinite(x_leaf)
        if not finite.all():
            first = offset + int(np.argwhere(~finite.reshape(len(x_leaf), -1).all(axis=1))[0][0])
            where = "" if array_name == "x" else f" in {array_name}"
            raise bad(f"has NaN or infinite input values{where}, the first in element {first}", name)
    for array_name, y_leaf in named_leaves(tf.nest.map_structure(np.asarray, y), "y"):
        where = "" if array_name == "y" else f" in {array_name}"
        if not np.all(np.isfinite(y_leaf)):
            raise bad(f"has NaN or infinite targets{where}", name)
        if class_labels and len(y_leaf) and (y_leaf.min() < 0 or not np.all(np.mod(y_leaf, 1) == 0)):
            wrong = y_leaf[(y_leaf < 0) | (np.mod(y_leaf, 1) != 0)][0]
            raise bad(f"has the label {wrong}{where}; expected class indices 0..K-1 (float targets need a "
                      f"training.loss such as 'mse')", name)


def _count(stream: StreamedSplit, name: str, bad, class_labels: bool) -> tuple[int, Any]:
    """(examples, classes per target tensor) in one pass over the split, checking values:
    integer labels count their classes, a row of K values K, anything else 1."""
    import tensorflow as tf

    x_spec, y_spec = stream.elements.element_spec
    specs, dtypes = tf.nest.flatten(y_spec), tf.nest.flatten(stream.target_dtype)
    tops = [-1] * len(specs)
    examples = 0
    # Integer targets keep their values through the cast; float ones are checked but not counted as classes.
    for x, y in stream.elements.batch(read_batch(x_spec)).prefetch(1):
        _check_values(x, y, name, bad, class_labels, offset=examples)
        examples += len(tf.nest.flatten(x)[0])
        for i, (leaf, dtype) in enumerate(zip(tf.nest.flatten(y), dtypes)):
            leaf = np.asarray(leaf)
            if dtype == "int32" and leaf.ndim == 1 and len(leaf):
                tops[i] = max(tops[i], int(leaf.max()))
    counts = [(top + 1 if top >= 0 else 1) if dtype == "int32" and spec.shape.rank == 0
              else (int(spec.shape[0]) if spec.shape.rank == 1 else 1)
              for spec, dtype, top in zip(specs, dtypes, tops)]
    return examples, tf.nest.pack_sequence_as(y_spec, counts)


def read_batch(x_spec) -> int:
    """Elements per read when checking or counting a split: bounded in bytes, not only in count
    (`x_spec`: the inputs' TensorSpec, or a dict or tuple of them)."""
    import tensorflow as tf

    example_bytes = sum(4 * int(np.prod([int(d) for d in s.shape])) for s in tf.nest.flatten(x_spec))
    return max(1, min(_READ_BATCH, _READ_BYTES // max(1, example_bytes)))
