"""Datasets: what a loader returns, checked and split into train / validation / held-out test.

The search only ever sees train and validation; test is kept for `hpo best --export`. A split
is in memory (arrays) or streamed (`tf.data`, see `hpo.data.dataset`). The loaders that
`data.dataset` names by a short name live in `LOADERS`, one module per family:
`builtin` (mnist, digits, synthetic), `files` (npz, csv), `images` (image_folder),
`keras_datasets` and `sklearn_sets`. Importing this package imports no TensorFlow.
"""

from __future__ import annotations

from typing import Callable, Mapping

from hpo.data.builtin import NETWORK_TIMEOUT_S, load_digits, load_mnist, load_synthetic
from hpo.data.dataset import SPLITS, Dataset, StreamedSplit, num_classes, split
from hpo.data.files import load_csv, load_npz
from hpo.data.images import load_image_folder
from hpo.data.keras_datasets import SETS as KERAS_SETS
from hpo.data.keras_datasets import keras_loader
from hpo.data.loading import load_arrays, load_dataset
from hpo.data.sklearn_sets import SETS as SKLEARN_SETS
from hpo.data.sklearn_sets import sklearn_loader
from hpo.references import resolve

LOADERS: dict[str, Callable] = {
    "mnist": load_mnist, "digits": load_digits, "synthetic": load_synthetic,
    "npz": load_npz, "csv": load_csv, "image_folder": load_image_folder,
    **{name: keras_loader(name) for name in KERAS_SETS},
    **{name: sklearn_loader(name) for name in SKLEARN_SETS},
}


def resolve_callable(ref: str, registry: Mapping[str, Callable], key: str | None = None) -> Callable:
    """A registry name, or 'package.module:function' (hpo.references: hooks only)."""
    return resolve(ref, registry, key=key)


__all__ = ["LOADERS", "NETWORK_TIMEOUT_S", "SPLITS", "Dataset", "StreamedSplit", "load_arrays", "load_csv",
           "load_dataset", "load_digits", "load_image_folder", "load_mnist", "load_npz", "load_synthetic",
           "num_classes", "resolve_callable", "split"]
