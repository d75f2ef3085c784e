"""`LOADERS`: the loaders `data.dataset` names by a short name, one module per family."""

from __future__ import annotations

from typing import Callable, Mapping

from hpo.data.builtin import load_digits, load_mnist, load_synthetic
from hpo.data.files import load_csv, load_npz
from hpo.data.images import load_image_folder
from hpo.data.keras_datasets import SETS as KERAS_SETS
from hpo.data.keras_datasets import keras_loader
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
