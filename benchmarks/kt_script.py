"""One Keras Tuner script, run twice: `import keras_tuner as kt` against `import hpo.keras_tuner as kt`.

    nice python benchmarks/kt_script.py                      # seeds 0-2, Hyperband max_epochs 9
    nice python benchmarks/kt_script.py --seeds 0 --max-epochs 3     # a quick look

The script (`script` below) is the same for both but for the import: a digits CNN whose depth is a
hyperparameter (the second layer's filters exist only at depth 2), Hyperband with max_epochs,
factor 3, batch 32. Data: scikit-learn's digits, one fixed shuffle, 1,000 images to train on,
400 to validate on (what the search ranks by) and 397 held out, which only the best model sees
at the end. Each run is a fresh process. Reported per run: the search's wall time, the trials,
the best model's held-out test accuracy; then the medians over seeds and the ratio of the
median wall times (Keras Tuner's over hpo's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORTS = {"keras_tuner": "keras_tuner", "hpo": "hpo.keras_tuner"}


def build_model(hp):
    import keras
    inputs = keras.Input((8, 8, 1))
    x = inputs
    for i in range(hp.Int("conv_layers", 1, 2)):
        x = keras.layers.Conv2D(hp.Int(f"filters_{i}", 8, 64, step=4), 3, padding="same", activation="relu")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(hp.Choice("dense_units", [32, 64, 128]), activation="relu")(x)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(keras.optimizers.Adam(hp.Float("learning_rate", 1e-4, 1e-2, sampling="log")),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def digits():
    import numpy as np
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(x))
    x = (x[order] / 16.0).astype("float32").reshape(-1, 8, 8, 1)
    y = y[order]
    return (x[:1000], y[:1000]), (x[1000:1400], y[1000:1400]), (x[1400:], y[1400:])


def script(module: str, seed: int, max_epochs: int, directory: str) -> dict:
    """The user's script: only `module` differs between the two runs."""
    import importlib

    import keras
    kt = importlib.import_module(module)
    keras.utils.set_random_seed(seed)
    (x, y), validation, (x_test, y_test) = digits()
    started = time.perf_counter()
    tuner = kt.Hyperband(build_model, objective="val_accuracy", max_epochs=max_epochs, factor=3, seed=seed,
                         directory=directory, project_name="digits", overwrite=True)
    tuner.search(x, y, validation_data=validation, batch_size=32, verbose=0)
    wall = time.perf_counter() - started
    best = tuner.get_best_models(1)[0]
    return {"module": module, "seed": seed, "wall_s": round(wall, 2), "trials": len(tuner.oracle.trials),
            "test_accuracy": round(float(best.evaluate(x_test, y_test, verbose=0)[1]), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-epochs", type=int, default=9)
    parser.add_argument("--run", choices=sorted(IMPORTS), help=argparse.SUPPRESS)   # one run, in this process
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        with tempfile.TemporaryDirectory(prefix="kt-script-") as directory:
            print(json.dumps(script(IMPORTS[args.run], args.seed, args.max_epochs, directory)))
        return
    sys.path.insert(0, str(ROOT))
    from benchmarks.machine import cpu_description
    print(cpu_description())
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    runs: dict[str, list[dict]] = {name: [] for name in IMPORTS}
    for seed in args.seeds:
        for name in IMPORTS:
            done = subprocess.run([sys.executable, __file__, "--run", name, "--seed", str(seed), "--max-epochs",
                                   str(args.max_epochs)], capture_output=True, text=True, env=env, cwd=ROOT)
            if done.returncode != 0:
                sys.exit(f"{name} seed {seed} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            runs[name].append(result)
            print(f"{name:12s} seed {seed}: {result['wall_s']:7.1f} s, {result['trials']:3d} trials, "
                  f"test accuracy {result['test_accuracy']:.4f}", flush=True)
    medians = {name: {key: statistics.median(r[key] for r in rs) for key in ("wall_s", "trials", "test_accuracy")}
               for name, rs in runs.items()}
    for name, m in medians.items():
        print(f"median {name:12s}: {m['wall_s']:7.1f} s, {m['trials']:g} trials, "
              f"test accuracy {m['test_accuracy']:.4f}")
    kt, ours = medians["keras_tuner"], medians["hpo"]
    print(f"wall-time ratio (Keras Tuner / hpo): {kt['wall_s'] / ours['wall_s']:.2f}x; "
          f"test accuracy hpo - Keras Tuner: {ours['test_accuracy'] - kt['test_accuracy']:+.4f}")


if __name__ == "__main__":
    main()
