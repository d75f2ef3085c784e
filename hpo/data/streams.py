"""A loader's split as a checked `StreamedSplit`: elements read in batches, never gathered whole.

What can be checked from the element spec is (pairs, unbatched, numeric, one input shape);
what needs values is checked on the first batch. A split whose length tf.data does not know
(a generator) is counted in one pass of bounded memory, which also checks every value is
finite and, for integer labels, finds the number of classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpo.data.dataset import StreamedSplit

_READ_BATCH = 1024        # elements per read in the counting pass and the first-batch check...
_READ_BYTES = 8 * 2 ** 20  # ...or fewer, so that one read holds at most this much input


def as_stream(value: Any, name: str, bad, class_labels: bool, count_classes: bool,
              limit: int | None = None) -> tuple[StreamedSplit, int | None]:
    """(the split as a stream, its number of classes when `count_classes`, else None)."""
    import tensorflow as tf

    from hpo.data.loading import check_arrays

    if not isinstance(value, tf.data.Dataset):
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise bad(f"is {type(value).__name__}; expected (x, y) arrays or a tf.data.Dataset of (x, y) "
                      f"elements", name)
        x, y = check_arrays(value[0], value[1], bad, class_labels, name)
        if limit is not None:
            x, y = x[:limit], y[:limit]
        elements = tf.data.Dataset.from_tensor_slices((x, y))
        stream = StreamedSplit(elements, len(x), tuple(x.shape[1:]), tuple(y.shape[1:]), str(y.dtype))
        return stream, (_classes(y) if count_classes else None)
    x_spec, y_spec = _pair_specs(value, name, bad)
    target_dtype = _target_dtype(y_spec, class_labels, name, bad)
    if limit is not None:
        value = value.take(limit)
    examples = int(value.cardinality())
    if examples == tf.data.INFINITE_CARDINALITY:
        raise bad("is infinite (a .repeat() without a count?); expected a finite dataset: hpo iterates it "
                  "once per epoch", name)
    stream = StreamedSplit(value, max(examples, 0), tuple(x_spec.shape), tuple(y_spec.shape), target_dtype)
    first_x, first_y = next(iter(value.batch(read_batch(x_spec))), (np.zeros((0,)), np.zeros((0,))))
    _check_values(np.asarray(first_x, dtype="float32"), np.asarray(first_y), name, bad, class_labels)
    classes = None
    if examples == tf.data.UNKNOWN_CARDINALITY or (count_classes and target_dtype == "int32"):
        examples, classes = _count(stream, name, bad, class_labels)
        stream = StreamedSplit(value, examples, stream.input_shape, stream.target_shape, target_dtype)
    if examples == 0:
        raise bad("has no elements", name)
    if count_classes and classes is None:
        classes = stream.target_shape[0] if len(stream.target_shape) == 1 else 1
    return stream, classes


def _pair_specs(value, name: str, bad) -> tuple[Any, Any]:
    import tensorflow as tf

    spec = value.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2 and all(isinstance(s, tf.TensorSpec) for s in spec)):
        raise bad(f"has elements {spec}; expected (x, y) pairs of tensors", name)
    x_spec, y_spec = spec
    if y_spec.shape.rank and y_spec.shape[0] is None:
        raise bad(f"has elements of shape {x_spec.shape} with targets {y_spec.shape}, which look batched; "
                  f"expected unbatched (x, y) elements (hpo batches each trial by its batch_size): drop the "
                  f".batch()", name)
    if x_spec.shape.rank is None or not x_spec.shape.is_fully_defined():
        raise bad(f"has inputs of shape {x_spec.shape}; expected every input to have one known shape", name)
    if not (x_spec.dtype.is_floating or x_spec.dtype.is_integer or x_spec.dtype.is_bool):
        raise bad(f"has non-numeric inputs (dtype {x_spec.dtype.name}); expected numbers", name)
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


def _check_values(x: np.ndarray, y: np.ndarray, name: str, bad, class_labels: bool, offset: int = 0) -> None:
    finite = np.isfinite(x)
    if not finite.all():
        first = offset + int(np.argwhere(~finite.reshape(len(x), -1).all(axis=1))[0][0])
        raise bad(f"has NaN or infinite input values, the first in element {first}", name)
    if not np.all(np.isfinite(y)):
        raise bad("has NaN or infinite targets", name)
    if class_labels and len(y) and (y.min() < 0 or not np.all(np.mod(y, 1) == 0)):
        wrong = y[(y < 0) | (np.mod(y, 1) != 0)][0]
        raise bad(f"has the label {wrong}; expected class indices 0..K-1 (float targets need a "
                  f"training.loss such as 'mse')", name)


def _count(stream: StreamedSplit, name: str, bad, class_labels: bool) -> tuple[int, int | None]:
    """(examples, classes in integer labels or None) in one pass over the split, checking values."""

    examples, top = 0, -1
    # Integer targets keep their values through the cast; float ones are checked but not counted as classes.
    for x, y in stream.elements.batch(read_batch(stream.input_shape)).prefetch(1):
        x, y = np.asarray(x, dtype="float32"), np.asarray(y)
        _check_values(x, y, name, bad, class_labels, offset=examples)
        examples += len(x)
        if stream.target_dtype == "int32" and y.ndim == 1 and len(y):
            top = max(top, int(y.max()))
    if stream.target_dtype == "int32" and len(stream.target_shape) == 0:
        return examples, top + 1 if top >= 0 else 1
    return examples, (stream.target_shape[0] if len(stream.target_shape) == 1 else 1)


def read_batch(input_shape) -> int:
    """Elements per read when checking or counting a split: bounded in bytes, not only in count."""
    shape = getattr(input_shape, "shape", input_shape)
    example_bytes = 4 * int(np.prod([int(d) for d in shape])) if len(shape) else 4
    return max(1, min(_READ_BATCH, _READ_BYTES // max(1, example_bytes)))


def _classes(y: np.ndarray) -> int:
    from hpo.data.dataset import num_classes
    return num_classes(y)
