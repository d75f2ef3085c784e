"""scikit-learn's bundled tabular data sets (no download): classification and regression."""

from __future__ import annotations

import numpy as np

# name -> (sklearn loader, what the targets are)
SETS = {"iris": ("load_iris", "3 classes"), "wine": ("load_wine", "3 classes"),
        "breast_cancer": ("load_breast_cancer", "2 classes"),
        "diabetes": ("load_diabetes", "a float target, standardised")}


def sklearn_loader(name: str):
    """The loader of one bundled set: features standardised (mean 0, sd 1 per column, as an
    MLP needs: the raw columns differ in scale by up to 1,000x); class labels as integers, the
    regression target standardised so `mae` reads in standard deviations."""
    function, targets = SETS[name]

    def load(standardize: bool = True) -> tuple[np.ndarray, np.ndarray, str]:
        import sklearn.datasets

        bunch = getattr(sklearn.datasets, function)()
        x = bunch.data.astype("float64")
        if standardize:
            x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1.0)
        y = bunch.target
        if y.dtype.kind == "f":
            y = ((y - y.mean()) / y.std()).astype("float32")
        else:
            y = y.astype("int32")
        return x.astype("float32"), y, f"sklearn.datasets.{function} ({len(x)} rows, {x.shape[1]} features, " \
                                       f"{targets})"
    load.__name__ = f"load_{name}"
    load.__doc__ = f"scikit-learn's bundled {name} data ({targets})."
    return load
