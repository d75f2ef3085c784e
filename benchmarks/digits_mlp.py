"""The digits MLP as a tabular multi-objective benchmark: validation accuracy against size.

    python benchmarks/digits_mlp.py          # regenerate benchmarks/data/digits_mlp.json

Real MLPs are trained once on scikit-learn's digits (8x8 images, 10 classes; 70% to train,
30% to validate, stratified, fixed seed) over a fixed grid of configurations, and their
validation accuracy after every epoch 1..27 is stored with their parameter count, as
NAS-Bench and HPOBench tabulate learning curves. A searcher's evaluation of a config at a
budget of b epochs then reads the table at epoch b: the real learning curves, with their
real early-epoch biases (small learning rates look bad early, wide models learn fast), at
no training cost, so that every peer and seed gets the same curves.

Training is scikit-learn's `MLPClassifier` with `partial_fit` (one pass over the training
set per call, Adam, ReLU, L2 penalty `alpha`, a fixed `random_state` per config): the same
dense ReLU network as the Keras digits model, but without importing TensorFlow, single
threaded and deterministic, so the table is cheap to regenerate anywhere. The generation
time is stored in the table (`seconds`).

The searchers' space is continuous where the grid is ordered (units, learning rate and
alpha on a log scale, layers an integer) and a config reads the nearest grid point (on the
log scale); `batch_size` is a choice. Objectives, both minimised: 1 - val_accuracy, and
the parameter count.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

TABLE = Path(__file__).resolve().parent / "data" / "digits_mlp.json"
EPOCHS = 27
GRID = {"layers": [1, 2],
        "units": [8, 16, 32, 64, 128],
        "lr": [3e-4, 1e-3, 3e-3, 1e-2, 3e-2],
        "alpha": [1e-5, 1e-3, 1e-1],
        "batch_size": [32, 256]}
SPACE = {"layers": {"type": "int", "low": 1, "high": 2},
         "units": {"type": "int", "low": 8, "high": 128, "log": True},
         "lr": {"type": "float", "low": 3e-4, "high": 3e-2, "log": True},
         "alpha": {"type": "float", "low": 1e-5, "high": 1e-1, "log": True},
         "batch_size": {"type": "choice", "values": [32, 256]}}


def params_of(layers: int, units: int, inputs: int = 64, classes: int = 10) -> int:
    """Weights and biases of a dense network inputs -> units (x layers) -> classes."""
    return inputs * units + units + (layers - 1) * (units * units + units) + units * classes + classes


def _key(config: Mapping[str, Any]) -> str:
    return json.dumps({name: config[name] for name in GRID}, sort_keys=True)


def generate(path: Path = TABLE, grid: Mapping[str, list] = GRID, epochs: int = EPOCHS) -> dict:
    """Train every `grid` config for `epochs` epochs and write the table to `path`. A config's
    `random_state` is its index in the grid's order (a grid that is a prefix of GRID's
    reproduces those rows' curves)."""
    import sklearn
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.3, stratify=y, random_state=0)
    classes = np.unique(y)
    started = time.perf_counter()
    rows = []
    for index, values in enumerate(itertools.product(*grid.values())):
        config = dict(zip(grid, values))
        model = MLPClassifier(hidden_layer_sizes=(config["units"],) * config["layers"], activation="relu",
                              solver="adam", learning_rate_init=config["lr"], alpha=config["alpha"],
                              batch_size=config["batch_size"], random_state=index)
        curve = []
        for _ in range(epochs):
            model.partial_fit(x_train, y_train, classes=classes)
            curve.append(round(float(model.score(x_val, y_val)), 6))
        counted = sum(w.size for w in model.coefs_) + sum(b.size for b in model.intercepts_)
        assert counted == params_of(config["layers"], config["units"])
        rows.append({"config": config, "params": counted, "val_accuracy": curve})
    table = {"grid": dict(grid), "epochs": epochs, "train_rows": len(x_train), "val_rows": len(x_val),
             "sklearn": sklearn.__version__, "seconds": round(time.perf_counter() - started, 1), "rows": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, separators=(",", ":")) + "\n")
    return table


@functools.lru_cache(maxsize=1)
def load(path: Path = TABLE) -> tuple[dict[str, tuple[int, list[float]]], dict]:
    """config key -> (params, validation accuracy per epoch), and the table's header."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `python benchmarks/digits_mlp.py` to train the grid")
    table = json.loads(path.read_text())
    curves = {_key(row["config"]): (row["params"], row["val_accuracy"]) for row in table["rows"]}
    return curves, {k: v for k, v in table.items() if k != "rows"}


def _nearest(name: str, value: Any) -> Any:
    grid = GRID[name]
    if SPACE[name]["type"] == "choice":
        return next(v for v in grid if str(v) == str(value))
    scale = math.log if SPACE[name].get("log") else float
    return min(grid, key=lambda v: (abs(scale(v) - scale(value)), v))


def grid_point(config: Mapping[str, Any]) -> dict[str, Any]:
    """The grid config a searcher's config reads: the nearest value per dimension."""
    return {name: _nearest(name, config[name]) for name in GRID}


def evaluate(config: Mapping[str, Any], budget: float) -> tuple[float, float]:
    """(1 - validation accuracy after `budget` epochs, parameter count) of the nearest grid config."""
    curves, _ = load()
    params, curve = curves[_key(grid_point(config))]
    epoch = min(EPOCHS, max(1, int(round(budget))))
    return 1.0 - curve[epoch - 1], float(params)


def largest_params() -> int:
    return params_of(max(GRID["layers"]), max(GRID["units"]))


if __name__ == "__main__":
    table = generate(Path(sys.argv[1]) if len(sys.argv) > 1 else TABLE)
    best = max(row["val_accuracy"][-1] for row in table["rows"])
    print(f"{len(table['rows'])} configs x {table['epochs']} epochs trained in {table['seconds']} s "
          f"(scikit-learn {table['sklearn']}); best final validation accuracy {best:.4f}")
