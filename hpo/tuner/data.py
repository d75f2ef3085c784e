"""The arrays (or `tf.data` datasets) handed to `tuner.search`, as an hpo loader.

The study's experiment names the loader `hpo.tuner.data:search_data` with the data's
fingerprint as its option, so a study resumed on other data is refused like any changed
experiment. The data itself never goes into the study: it is registered in this process
(`register`), and a worker process gets it once, inside its trainer factory
(`hpo.tuner.trainer.TrainerFactory`), which registers it there before the loader runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hpo.data.fingerprint import arrays_digest

LOADER = "hpo.tuner.data:search_data"
_REGISTRY: dict[str, "SearchData"] = {}


@dataclass(frozen=True)
class SearchData:
    train: tuple[Any, Any]             # (x, y) arrays, or (dataset, None): an unbatched tf.data.Dataset
    validation: tuple[Any, Any]
    key: str                           # the fingerprint
    batch_size: int | None = None      # a batched dataset's own batch size

    @property
    def streamed(self) -> bool:
        return self.train[1] is None

    def splits(self) -> dict[str, Any]:
        if self.streamed:
            return {"train": self.train[0], "validation": self.validation[0], "source": "tuner.search (tf.data)"}
        return {"train": self.train, "validation": self.validation, "source": "tuner.search arrays"}


def register(data: SearchData) -> None:
    _REGISTRY[data.key] = data


def search_data(key: str) -> dict[str, Any]:
    """The loader the experiment names: the splits registered under `key`."""
    if key not in _REGISTRY:
        raise ValueError(f"this study's data came from tuner.search() in the script that ran it (fingerprint "
                         f"{key}); it cannot be loaded outside that script. Run the script again to resume, "
                         f"and save a model from it with tuner.get_best_models(1)[0].save(PATH).")
    return _REGISTRY[key].splits()


def from_search_arguments(x, y=None, validation_data=None, validation_split: float = 0.0,
                          batch_size: int | None = None) -> SearchData:
    """`tuner.search`'s data arguments as Keras's `fit` reads them: `validation_split` takes the
    last fraction of the arrays (before any shuffling), `validation_data` is `(x, y)` or a
    dataset. A ValueError names what cannot be used, and what to pass instead."""
    _refuse_streams(x, "x")
    _refuse_streams(validation_data, "validation_data")
    if _is_dataset(x):
        if y is not None:
            raise ValueError("tuner.search(x=<tf.data.Dataset>, y=...): with a dataset, y must be None (the "
                             "dataset yields (x, y) pairs)")
        if validation_split:
            raise ValueError("validation_split is not supported with a tf.data.Dataset (Keras's fit refuses it "
                             "too); pass validation_data")
        if validation_data is None:
            raise ValueError("tuner.search needs validation data: pass validation_data= (or, with arrays, "
                             "validation_split=)")
        if not _is_dataset(validation_data):
            raise ValueError("with a tf.data.Dataset for x, pass validation_data as a dataset too")
        train, size = _unbatched(x, "x")
        validation, _ = _unbatched(validation_data, "validation_data")
        return SearchData((train, None), (validation, None), key=f"tf.data:{train.element_spec}",
                          batch_size=batch_size or size)
    if y is None:
        raise ValueError("tuner.search(x, y): y is missing; pass the targets (or a tf.data.Dataset of (x, y) as x)")
    x, y = _array(x, "x"), _array(y, "y")
    if len(x) != len(y):
        raise ValueError(f"tuner.search(x, y): x has {len(x)} examples but y has {len(y)}; pass one target per "
                         f"example (the same first dimension)")
    if validation_data is not None:
        if _is_dataset(validation_data):
            raise ValueError("with arrays for x and y, pass validation_data as (x_val, y_val) arrays")
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError("validation_data must be a tuple (x_val, y_val)")
        if len(validation_data) == 3:
            raise ValueError("validation_data with sample weights (x, y, w) is not supported by hpo")
        xv, yv = _array(validation_data[0], "validation x"), _array(validation_data[1], "validation y")
        if len(xv) != len(yv) or len(xv) == 0:
            raise ValueError(f"validation_data holds {len(xv)} inputs and {len(yv)} targets; pass one target per "
                             f"input, at least one")
    elif validation_split:
        if not 0 < validation_split < 1:
            raise ValueError(f"validation_split must be between 0 and 1, got {validation_split}")
        cut = int(len(x) * (1 - validation_split))
        if cut < 1 or cut >= len(x):
            raise ValueError(f"validation_split={validation_split} of {len(x)} examples leaves "
                             f"{cut} to train on and {len(x) - cut} to validate on; both must be at least one")
        x, xv, y, yv = x[:cut], x[cut:], y[:cut], y[cut:]
    else:
        raise ValueError("tuner.search needs validation data to rank trials: pass validation_data=(x_val, y_val) "
                         "or validation_split=")
    return SearchData((x, y), (xv, yv), key=arrays_digest((x, y, xv, yv), "sha1")[:16], batch_size=batch_size)


SEVERAL_ARRAYS = ("are not supported by the Keras Tuner face: a model with several inputs or outputs runs with "
                  "`hpo search` and a loader of your own (README, 'Your own task and data')")


def _several(value: Any) -> str | None:
    """'a dict of N' or 'a list of N' where `value` holds several arrays (as Keras reads a
    dict, or a list or tuple of arrays, for a model with several inputs or outputs)."""
    if isinstance(value, dict):
        return f"a dict of {len(value)}"
    if isinstance(value, (list, tuple)) and value and all(getattr(v, "ndim", 0) >= 1 for v in value):
        return f"a {type(value).__name__} of {len(value)}"
    return None


def _array(value: Any, what: str) -> np.ndarray:
    several = _several(value)
    if several is not None:
        raise ValueError(f"{what}: several arrays ({several}) {SEVERAL_ARRAYS}")
    try:
        array = np.asarray(value)
    except Exception as exc:
        raise ValueError(f"{what}: cannot be read as an array ({exc})") from None
    if array.dtype == object or array.ndim == 0:
        raise ValueError(f"{what}: expected a numeric array, got {type(value).__name__} of dtype {array.dtype}")
    return array


def _refuse_streams(value: Any, what: str) -> None:
    """A Python generator, iterator or `keras.utils.PyDataset`/`Sequence`: hpo reads the data
    again for every trial and epoch (and sends it to workers), which a one-pass stream cannot
    give. Refused, saying what to pass."""
    import inspect
    from collections.abc import Iterator

    kind = None
    if inspect.isgenerator(value):
        kind = "a generator"
    elif isinstance(value, Iterator) and not _is_dataset(value):
        kind = f"an iterator ({type(value).__name__})"
    elif any(k.__name__ in ("PyDataset", "Sequence") and k.__module__.startswith("keras")
             for k in type(value).__mro__):
        kind = f"a keras {type(value).__name__}"
    if kind is not None:
        raise ValueError(f"tuner.search({what}=...): {kind} cannot be searched over: every trial reads the data "
                         f"again, which a stream read once cannot give. Pass arrays (x, y), or a batched "
                         f"tf.data.Dataset of (x, y) (tf.data.Dataset.from_generator(make_generator, ...) makes "
                         f"one of a function that returns a fresh generator)")


def _is_dataset(value: Any) -> bool:
    return type(value).__module__.startswith("tensorflow") and hasattr(value, "element_spec")


def _unbatched(dataset, what: str):
    """A batched dataset of (x, y), as `fit` takes one, as unbatched elements, and its batch size."""
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise ValueError(f"{what}: expected a batched dataset of (x, y) pairs, got elements {spec}")
    if len(spec) == 3:
        raise ValueError(f"{what}: sample weights (x, y, w) are not supported by hpo")
    for part in spec:
        if isinstance(part, (dict, tuple, list)):
            raise ValueError(f"{what}: a dataset whose elements hold several arrays (a {type(part).__name__} of "
                             f"{len(part)}) {SEVERAL_ARRAYS}")
    first = next(iter(dataset.take(1)), None)
    if first is None:
        raise ValueError(f"{what}: the dataset is empty")
    shapes = [tensor.shape for tensor in first]
    if any(shape.rank is None or shape.rank < 1 for shape in shapes) or len({s[0] for s in shapes}) > 1:
        raise ValueError(f"tuner.search({what}=...): the dataset yields single examples (x of shape {shapes[0]}, "
                         f"y of shape {shapes[1]}), not batches; model.fit reads a dataset of batches, and so does "
                         f"search: pass {what}=dataset.batch(32)")
    return dataset.unbatch(), int(first[0].shape[0])


def example_shape(data: SearchData) -> tuple[int, ...] | None:
    """One training example's input shape, where the inputs are one array (None for several,
    or a shape the data leaves open)."""
    x = data.train[0]
    if data.streamed:
        spec = x.element_spec
        spec = spec[0] if isinstance(spec, tuple) else spec
        shape = getattr(spec, "shape", None)
        return tuple(int(d) for d in shape) if shape is not None and shape.is_fully_defined() else None
    shape = getattr(x, "shape", None)
    return tuple(int(d) for d in shape[1:]) if shape is not None else None
