"""Datasets: what a loader returns, checked and split into train / validation / held-out test.

The search only ever sees train and validation; test is kept for `hpo best --export`. A split
is in memory (arrays) or streamed (`tf.data`, see `hpo.data.dataset`). The loaders that
`data.dataset` names by a short name live in `LOADERS`, one module per family:
`builtin` (mnist, digits, synthetic), `files` (npz, csv), `images` (image_folder),
`keras_datasets` and `sklearn_sets`. Importing this package imports no TensorFlow.
"""

from __future__ import annotations

from hpo.data.builtin import NETWORK_TIMEOUT_S, load_digits, load_mnist, load_synthetic
from hpo.data.dataset import SPLITS, Dataset, StreamedSplit, num_classes, split
from hpo.data.files import load_csv, load_npz
from hpo.data.images import load_image_folder
from hpo.data.loaders import LOADERS, resolve_callable
from hpo.data.loading import announce_data, load_arrays, load_dataset

__all__ = ["LOADERS", "NETWORK_TIMEOUT_S", "SPLITS", "Dataset", "StreamedSplit", "announce_data", "load_arrays",
           "load_csv", "load_dataset", "load_digits", "load_image_folder", "load_mnist", "load_npz", "load_synthetic",
           "num_classes", "resolve_callable", "split"]
