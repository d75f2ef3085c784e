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

import inspect
import logging
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hpo.data.checks import LoaderProblem, check_arrays
from hpo.data.dataset import SPLITS, Dataset, classes_of, split
from hpo.data.loaders import LOADERS, resolve_callable
from hpo.data.nested import example_shapes, is_nested, leaves, map_tree, rows
from hpo.data.settings import DataConfig
from hpo.errors import UserInputError, closest

log = logging.getLogger("hpo.data")


SPLIT_KEYS = (*SPLITS, "source", "num_classes")
_COUNT_BATCH = 1024       # elements per read when a stream is counted: bounded memory, few Python calls


def _check_options(signature: inspect.Signature, options: dict, bad: LoaderProblem) -> None:
    """Every option is one the loader takes by name (a misspelt one would be dropped unsaid by
    a loader taking **kwargs, so only the user's own may)."""
    params = signature.parameters
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        unknown = [key for key in options if key not in named]
        if unknown:
            near = closest(unknown[0], named)
            raise bad(f"takes no option {unknown[0]!r}" + (f"; did you mean {near!r}?" if near else "") +
                      f" (data.options; it takes {', '.join(named) if named else 'none'})")
    try:
        signature.bind(**options)
    except TypeError as exc:
        raise bad(f"does not accept data.options {options}: {exc}") from None


def call_loader(config: DataConfig) -> tuple[Any, LoaderProblem]:
    ref = config.dataset
    loader: Callable = resolve_callable(ref, LOADERS, key="data.dataset")
    bad = LoaderProblem(ref)
    options = dict(config.options)
    try:
        signature = inspect.signature(loader)
    except ValueError:      # a callable without a signature to read: the call says
        signature = None
    if signature is not None:
        _check_options(signature, options, bad)
    try:
        return loader(**options), bad
    except UserInputError:      # a loader's own refusal (a built-in's, naming its option): as it is
        raise
    except Exception as exc:   # the user's loader: its error is the user's to fix, before any study
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        raise bad(f"failed: {type(exc).__name__}: {exc} (at {Path(frame.filename).name}:{frame.lineno})") from None


def load_dataset(config: DataConfig, seed: int = 0, class_labels: bool = True, announce: bool = True) -> Dataset:
    """The loader's data, checked, as train / validation / test splits (`announce`: say so in the log)."""
    loaded, bad = call_loader(config)
    if isinstance(loaded, dict):
        dataset = _from_splits(loaded, config, class_labels, bad)
    else:
        x, y, source = _arrays_result(loaded, bad, class_labels)
        dataset = split(config.dataset, source, x, y, config, seed)
    if announce:
        announce_data(dataset)
    return dataset


def announce_data(dataset: Dataset) -> None:
    """Say in the log which data a trainer trains on (a load, or a dataset loaded before)."""
    log.info("data: %s", dataset.describe())


def load_arrays(config: DataConfig, class_labels: bool = True) -> tuple[np.ndarray, np.ndarray, str]:
    """The `(x, y, source)` of a loader that returns arrays to be split, checked."""
    loaded, bad = call_loader(config)
    if isinstance(loaded, dict):
        raise bad("returned named splits; expected (x, y) or (x, y, source) arrays here")
    return _arrays_result(loaded, bad, class_labels)


def _arrays_result(loaded: Any, bad: LoaderProblem, class_labels: bool) -> tuple[np.ndarray, np.ndarray, str]:
    if _is_tf_dataset(loaded):
        raise bad("returned a tf.data.Dataset; expected (x, y) arrays, or a dict of splits "
                  "{'train': dataset, 'validation': dataset} to stream it")
    if not isinstance(loaded, (tuple, list)) or len(loaded) not in (2, 3):
        raise bad(f"returned {type(loaded).__name__}; expected (x, y), (x, y, source) or a dict of splits "
                  f"{{'train': ..., 'validation': ..., 'test': ...}}")
    if len(loaded) == 3 and not isinstance(loaded[2], str):
        # Keras's (x, y, sample_weight): weights taken for a description would be dropped unsaid.
        raise bad(f"returned a third element of type {type(loaded[2]).__name__}; expected (x, y) or (x, y, "
                  f"source) with source a description string (per-example weights, as model.fit's "
                  f"sample_weight, are not supported)")
    (x, y), source = loaded[:2], (str(loaded[2]) if len(loaded) == 3 else bad.ref)
    x, y = check_arrays(x, y, bad, class_labels)
    if rows(x) < 2:
        raise bad(f"returned {rows(x)} example(s); expected enough to split into train and validation")
    return x, y, source


def _from_splits(loaded: dict, config: DataConfig, class_labels: bool, bad: LoaderProblem) -> Dataset:
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
    defaults = type(config)           # the dataclass's field defaults
    if config.validation_split != defaults.validation_split or config.test_split != defaults.test_split:
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
    elif class_labels:
        for name, (_, y) in arrays.items():
            _check_labels_below(classes_of([y]), classes, name, bad, "num_classes gives")
    return Dataset(name=config.dataset, source=source, x_train=x_train, y_train=y_train,
                   x_val=arrays["validation"][0], y_val=arrays["validation"][1], x_test=x_test, y_test=y_test,
                   num_classes=classes)


def _check_labels_below(counted: Any, classes: Any, name: str, bad: LoaderProblem, named: str) -> None:
    """A split's class indices all below the K the model is built for (`classes`: what
    `named` says, verb included), per target array where there are several; the loss fails
    every trial on a label past it."""
    seen_each = leaves(counted)
    # One K for every target array where the loader gives one number for several outputs.
    allowed_each = leaves(classes) if is_nested(classes) else [classes] * len(seen_each)
    for seen, allowed in zip(seen_each, allowed_each):
        if isinstance(seen, int) and isinstance(allowed, int) and seen > allowed:
            raise bad(f"has the label {seen - 1}, but {named} {allowed} classes; expected class indices "
                      f"0..{allowed - 1}", name)


def _split_arrays(value: Any, name: str, bad: LoaderProblem, class_labels: bool) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise bad(f"is {type(value).__name__}; expected (x, y) arrays or a tf.data.Dataset of (x, y) elements",
                  name)
    return check_arrays(value[0], value[1], bad, class_labels, name)


def _head(tree: Any, n: int) -> Any:
    return map_tree(lambda a: a[:n], tree)


def _check_same_shapes(shapes: dict[str, tuple], bad: LoaderProblem) -> None:
    train = shapes["train"]
    for name, shape in shapes.items():
        if shape != train:
            raise bad(f"has examples of shape {shape[0]} with targets {shape[1]}, but 'train' has "
                      f"{train[0]} with targets {train[1]}; expected the same in every split", name)


# Examples of each streamed split checked against a loader's num_classes without a pass over it.
READ_FIRST = 256


def _streamed(given: dict, config: DataConfig, class_labels: bool, bad: LoaderProblem, classes: int | None,
              source: str) -> Dataset:
    from hpo.data.streams import as_stream

    # Where the loader gives no num_classes, every split's classes are counted (train's set K,
    # and a label past it in validation or test would fail every trial); where it gives one,
    # no split is read through: each one's first batch is checked against it.
    streams = {name: as_stream(value, name, bad, class_labels,
                               count_classes=classes is None and (class_labels or name == "train"),
                               limit=config.limit if name == "train" else None)
               for name, value in given.items()}
    _check_same_shapes({n: (s[0].input_shape, s[0].target_shape) for n, s in streams.items()}, bad)
    if class_labels and classes is not None:
        for name, (stream, _) in streams.items():
            _check_labels_below(classes_of([stream.first(READ_FIRST)[1]]), classes, name, bad, "num_classes gives")
    if classes is None:
        classes = streams["train"][1]
        if class_labels:
            for name, (_, counted) in streams.items():
                if name != "train" and counted is not None:
                    _check_labels_below(counted, classes, name, bad, "the train split's labels give")
    return Dataset(name=config.dataset, source=source, x_train=None, y_train=None, x_val=None, y_val=None,
                   x_test=None, y_test=None, num_classes=classes,
                   streams={name: stream for name, (stream, _) in streams.items()})


def _is_tf_dataset(value: Any) -> bool:
    if "tensorflow" not in sys.modules:      # a loader that built one has imported TensorFlow
        return False
    import tensorflow as tf
    return isinstance(value, tf.data.Dataset)


