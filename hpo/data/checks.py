"""What a loader returned, checked as arrays: one or several inputs and targets, every
array finite and of matching length, class labels whole and non-negative. Each problem is a
ConfigError at `data.dataset` naming the loader and the split (`LoaderProblem`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hpo.data.nested import is_nested, map_named, named_leaves, rows
from hpo.errors import ConfigError


class LoaderProblem:
    """Builds the ConfigError of one loader (and, when given, one of its splits)."""

    def __init__(self, ref: str):
        self.ref = ref

    def __call__(self, what: str, split_name: str | None = None) -> ConfigError:
        where = f"the loader {self.ref!r}" + (f", split {split_name!r}," if split_name else "")
        return ConfigError(f"{where} {what}", key="data.dataset")


def check_arrays(x: Any, y: Any, bad: LoaderProblem, class_labels: bool,
                 split_name: str | None = None) -> tuple[Any, Any]:
    """Inputs as finite float32; targets as class indices 0..K-1 when `class_labels` (the
    default loss, sparse categorical cross-entropy, reads them so), else as finite numbers:
    one value per example (a regression, 0/1) or a row per example (one-hot, multi-label).
    `x` and `y` may each be one array or several (`hpo.data.nested`: a dict of named arrays, a
    tuple or list), for a model with several inputs or outputs: each array is checked so, and
    all hold the same number of examples."""
    x_arrays = _as_arrays(x, "inputs", bad, split_name)
    y_arrays = _as_arrays(y, "labels", bad, split_name)
    arrays = [*named_leaves(x_arrays, "x"), *named_leaves(y_arrays, "y")]
    lengths = {name: len(a) for name, a in arrays if a.ndim}
    scalars = [name for name, a in arrays if a.ndim == 0]
    if not is_nested(x) and not is_nested(y) and (scalars or len(set(lengths.values())) > 1):
        raise bad(f"returned {_examples_text(np.asarray(x_arrays), x, 'inputs')} but "
                  f"{_examples_text(np.asarray(y_arrays), y, 'labels')}; expected one label per input", split_name)
    if scalars:
        raise bad(f"returned a scalar as {scalars[0]}; expected an array with one row per example", split_name)
    if len(set(lengths.values())) > 1:
        shown = list(lengths.items())
        counts = ", ".join(f"{name}: {n}" for name, n in shown[:6]) + (", ..." if len(shown) > 6 else "")
        raise bad(f"returned arrays of different lengths ({counts}); expected one row per example in each (a "
                  f"tuple or list of arrays is several inputs or targets, as in Keras's fit: np.stack rows into "
                  f"one array)", split_name)
    if rows(x_arrays) == 0:
        raise bad("returned no examples", split_name)
    checked_x = map_named(lambda name, a: _checked_inputs(a, name, bad, split_name), x_arrays, "x")
    checked_y = map_named(lambda name, a: _checked_targets(a, bad, class_labels, split_name, name), y_arrays, "y")
    return checked_x, checked_y


def _examples_text(array: np.ndarray, given: Any, what: str) -> str:
    """How many examples an array holds, for a message: '400 inputs', or what was given
    instead ('None as labels', 'a csr_matrix object as inputs')."""
    if array.ndim:
        return f"{len(array):,} {what}"
    if given is None:
        return f"None as {what}"
    if np.isscalar(given):
        return f"the single value {given!r} as {what}"
    return f"a {type(given).__name__} object as {what}"


def _as_arrays(tree: Any, what: str, bad: LoaderProblem, split_name: str | None) -> Any:
    """`tree` with every leaf a NumPy array; dict keys must be names and no structure empty."""
    if isinstance(tree, dict):
        if not tree or not all(isinstance(k, str) for k in tree):
            raise bad(f"returned {what} as a dict with keys {sorted(map(str, tree))}; expected a dict of named "
                      f"arrays, keyed by the model's {'input' if what == 'inputs' else 'output'} names",
                      split_name)
        return {k: _as_arrays(v, what, bad, split_name) for k, v in tree.items()}
    # Several arrays, not rows: a tuple or list whose items are themselves arrays or dicts (a
    # list of Python lists or numbers is one array, as numpy reads it).
    if isinstance(tree, (tuple, list)) and tree and all(isinstance(v, dict) or getattr(v, "ndim", 0) >= 1
                                                         for v in tree):
        return tuple(_as_arrays(v, what, bad, split_name) for v in tree)
    try:
        return np.asarray(tree)
    except Exception as exc:  # ragged or exotic objects: numpy says why
        raise bad(f"returned arrays numpy cannot read: {exc}", split_name) from None


def _checked_inputs(x: np.ndarray, name: str, bad: LoaderProblem, split_name: str | None) -> np.ndarray:
    what = "inputs" if name == "x" else f"inputs {name}"
    if x.dtype.kind not in "biuf":
        raise bad(f"returned non-numeric {what} (dtype {x.dtype}); expected numbers", split_name)
    if 0 in x.shape[1:]:
        # A model over no features aborts TensorFlow's process, not a trial (exit 134).
        hint = "; a .csv read with the wrong delimiter gives one column (data.options.delimiter)" \
            if x.ndim == 2 and "csv" in bad.ref else ""
        raise bad(f"returned {what} of shape {x.shape}, with no features; expected at least one value per "
                  f"example{hint}", split_name)
    x = x.astype("float32")
    finite = np.isfinite(x)
    if not finite.all():
        first = int(np.argwhere(~finite.reshape(len(x), -1).all(axis=1))[0][0])
        raise bad(f"returned {int((~finite).sum())} NaN or infinite input value(s)"
                  f"{'' if name == 'x' else ' in ' + name}, the first in example {first}", split_name)
    return x


def _checked_targets(y: np.ndarray, bad: LoaderProblem, class_labels: bool, split_name: str | None,
                     name: str = "y") -> np.ndarray:
    expected = "class index 0..K-1" if class_labels else "target (a value, or a row of K values)"
    labels = "labels" if name == "y" else f"labels {name}"
    if class_labels and y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]            # a column of class indices, as Keras's sparse losses take it too
    if y.dtype.kind not in "biuf" or y.ndim > (1 if class_labels else 2):
        raise bad(f"returned {labels} of shape {y.shape} and dtype {y.dtype}; expected one {expected} per example",
                  split_name)
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise bad(f"returned {int((~np.isfinite(y)).sum())} NaN or infinite target(s)"
                  f"{'' if name == 'y' else ' in ' + name}", split_name)
    if not class_labels:
        # Another loss reads the targets as they are: floats (a regression, 0/1, one-hot) or integers.
        return y.astype("float32") if y.dtype.kind == "f" else y.astype("int32")
    if (y.dtype.kind == "f" and not np.all(np.mod(y, 1) == 0)) or (len(y) and y.min() < 0):
        raise bad(f"returned {labels} of shape {y.shape} and dtype {y.dtype}; expected one class index "
                  f"0..K-1 per example (float targets need a training.loss such as 'mse')", split_name)
    return y.astype("int32")


# --- named splits ------------------------------------------------------------------------------

