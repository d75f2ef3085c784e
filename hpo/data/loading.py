"""Call the experiment's loader once and turn what it returned into a checked `Dataset`.

A loader returns one of:
- `(x, y)` or `(x, y, source)`: arrays that hpo shuffles (seeded) and splits by
  `data.validation_split` and `data.test_split`;
- a dict of named splits `{"train": ..., "validation": ..., "test": ...}` (test optional,
  `"source"` and `"num_classes"` optional), each split `(x, y)` arrays or a `tf.data.Dataset`
  of unbatched `(x, y)` elements, used as given.

In each form `x` and `y` may each be several arrays, a dict keyed by the model's input or
output names or a tuple in its order (`hpo.data.nested`), for a model with several inputs or
outputs: every array is checked, and all are cut by the same shuffle.

Every problem is a ConfigError at `data.dataset` naming the loader, the split and what was
wrong, raised in the pre-flight before a study folder exists.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable

import numpy as np

from hpo.config import DataConfig
from hpo.data.dataset import SPLITS, Dataset, classes_of, split
from hpo.data.nested import example_shapes, is_nested, map_named, map_tree, named_leaves, rows
from hpo.errors import ConfigError

log = logging.getLogger("hpo.data")

SPLIT_KEYS = (*SPLITS, "source", "num_classes")
_COUNT_BATCH = 1024       # elements per read when a stream is counted: bounded memory, few Python calls


class _Problem:
    """Builds the ConfigError of one loader (and, when given, one of its splits)."""

    def __init__(self, ref: str):
        self.ref = ref

    def __call__(self, what: str, split_name: str | None = None) -> ConfigError:
        where = f"the loader {self.ref!r}" + (f", split {split_name!r}," if split_name else "")
        return ConfigError(f"{where} {what}", key="data.dataset")


def call_loader(config: DataConfig) -> tuple[Any, _Problem]:
    from hpo.data import LOADERS, resolve_callable

    ref = config.dataset
    loader: Callable = resolve_callable(ref, LOADERS, key="data.dataset")
    bad = _Problem(ref)
    try:
        return loader(**dict(config.options)), bad
    except TypeError as exc:
        raise bad(f"does not accept data.options {dict(config.options)}: {exc}") from None


def load_dataset(config: DataConfig, seed: int = 0, class_labels: bool = True, announce: bool = True) -> Dataset:
    """The loader's data, checked, as train / validation / test splits (`announce`: say so in the log)."""
    loaded, bad = call_loader(config)
    if isinstance(loaded, dict):
        dataset = _from_splits(loaded, config, class_labels, bad)
    else:
        x, y, source = _arrays_result(loaded, bad, class_labels)
        dataset = split(config.dataset, source, x, y, config, seed)
    if announce:
        log.info("data: %s", dataset.describe())
    return dataset


def load_arrays(config: DataConfig, class_labels: bool = True) -> tuple[np.ndarray, np.ndarray, str]:
    """The `(x, y, source)` of a loader that returns arrays to be split, checked."""
    loaded, bad = call_loader(config)
    if isinstance(loaded, dict):
        raise bad("returned named splits; expected (x, y) or (x, y, source) arrays here")
    return _arrays_result(loaded, bad, class_labels)


def _arrays_result(loaded: Any, bad: _Problem, class_labels: bool) -> tuple[np.ndarray, np.ndarray, str]:
    if _is_tf_dataset(loaded):
        raise bad("returned a tf.data.Dataset; expected (x, y) arrays, or a dict of splits "
                  "{'train': dataset, 'validation': dataset} to stream it")
    if not isinstance(loaded, (tuple, list)) or len(loaded) not in (2, 3):
        raise bad(f"returned {type(loaded).__name__}; expected (x, y), (x, y, source) or a dict of splits "
                  f"{{'train': ..., 'validation': ..., 'test': ...}}")
    (x, y), source = loaded[:2], (str(loaded[2]) if len(loaded) == 3 else bad.ref)
    x, y = check_arrays(x, y, bad, class_labels)
    if rows(x) < 2:
        raise bad(f"returned {rows(x)} example(s); expected enough to split into train and validation")
    return x, y, source


def check_arrays(x: Any, y: Any, bad: _Problem, class_labels: bool,
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
        x_arrays, y_arrays = np.asarray(x_arrays), np.asarray(y_arrays)
        raise bad(f"returned {x_arrays.shape[:1] or 'a scalar'} inputs but {y_arrays.shape[:1] or 'a scalar'} "
                  f"labels; expected one label per input", split_name)
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


def _as_arrays(tree: Any, what: str, bad: _Problem, split_name: str | None) -> Any:
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


def _checked_inputs(x: np.ndarray, name: str, bad: _Problem, split_name: str | None) -> np.ndarray:
    what = "inputs" if name == "x" else f"inputs {name}"
    if x.dtype.kind not in "biuf":
        raise bad(f"returned non-numeric {what} (dtype {x.dtype}); expected numbers", split_name)
    x = x.astype("float32")
    finite = np.isfinite(x)
    if not finite.all():
        first = int(np.argwhere(~finite.reshape(len(x), -1).all(axis=1))[0][0])
        raise bad(f"returned {int((~finite).sum())} NaN or infinite input value(s)"
                  f"{'' if name == 'x' else ' in ' + name}, the first in example {first}", split_name)
    return x


def _checked_targets(y: np.ndarray, bad: _Problem, class_labels: bool, split_name: str | None,
                     name: str = "y") -> np.ndarray:
    expected = "class index 0..K-1" if class_labels else "target (a value, or a row of K values)"
    labels = "labels" if name == "y" else f"labels {name}"
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

def _from_splits(loaded: dict, config: DataConfig, class_labels: bool, bad: _Problem) -> Dataset:
    unknown = sorted(str(k) for k in loaded if k not in SPLIT_KEYS)
    if unknown:
        raise bad(f"returned a dict with key(s) {unknown}; expected the splits 'train', 'validation' and "
                  f"optionally 'test' (and optionally 'source' and 'num_classes')")
    missing = [name for name in ("train", "validation") if name not in loaded]
    if missing:
        raise bad(f"returned a dict without {' or '.join(repr(m) for m in missing)}; expected at least "
                  f"'train' and 'validation' splits")
    classes = loaded.get("num_classes")
    if classes is not None and (isinstance(classes, bool) or not isinstance(classes, int) or classes < 1):
        raise bad(f"returned num_classes {classes!r}; expected a positive integer")
    source = str(loaded.get("source", config.dataset))
    given = {name: loaded[name] for name in SPLITS if name in loaded}
    if config.validation_split != DataConfig.validation_split or config.test_split != DataConfig.test_split:
        log.info("data: the loader names its splits; data.validation_split and data.test_split are not used")
    if any(_is_tf_dataset(value) for value in given.values()):
        return _streamed(given, config, class_labels, bad, classes, source)
    arrays = {name: _split_arrays(value, name, bad, class_labels) for name, value in given.items()}
    _check_same_shapes({n: (example_shapes(x), example_shapes(y)) for n, (x, y) in arrays.items()}, bad)
    x_train, y_train = arrays["train"]
    if config.limit is not None:
        x_train, y_train = _head(x_train, config.limit), _head(y_train, config.limit)
    x_test, y_test = arrays.get("test", (_head(x_train, 0), _head(y_train, 0)))
    if classes is None:
        classes = classes_of([y for _, y in arrays.values()])
    return Dataset(name=config.dataset, source=source, x_train=x_train, y_train=y_train,
                   x_val=arrays["validation"][0], y_val=arrays["validation"][1], x_test=x_test, y_test=y_test,
                   num_classes=classes)


def _split_arrays(value: Any, name: str, bad: _Problem, class_labels: bool) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise bad(f"is {type(value).__name__}; expected (x, y) arrays or a tf.data.Dataset of (x, y) elements",
                  name)
    return check_arrays(value[0], value[1], bad, class_labels, name)


def _head(tree: Any, n: int) -> Any:
    return map_tree(lambda a: a[:n], tree)


def _check_same_shapes(shapes: dict[str, tuple], bad: _Problem) -> None:
    train = shapes["train"]
    for name, shape in shapes.items():
        if shape != train:
            raise bad(f"has examples of shape {shape[0]} with targets {shape[1]}, but 'train' has "
                      f"{train[0]} with targets {train[1]}; expected the same in every split", name)


def _streamed(given: dict, config: DataConfig, class_labels: bool, bad: _Problem, classes: int | None,
              source: str) -> Dataset:
    from hpo.data.streams import as_stream

    streams = {name: as_stream(value, name, bad, class_labels, count_classes=(name == "train" and classes is None),
                               limit=config.limit if name == "train" else None)
               for name, value in given.items()}
    _check_same_shapes({n: (s[0].input_shape, s[0].target_shape) for n, s in streams.items()}, bad)
    if classes is None:
        classes = streams["train"][1]
    return Dataset(name=config.dataset, source=source, x_train=None, y_train=None, x_val=None, y_val=None,
                   x_test=None, y_test=None, num_classes=classes,
                   streams={name: stream for name, (stream, _) in streams.items()})


def _is_tf_dataset(value: Any) -> bool:
    if "tensorflow" not in sys.modules:      # a loader that built one has imported TensorFlow
        return False
    import tensorflow as tf
    return isinstance(value, tf.data.Dataset)


