"""Our trainer against `model.fit` and Keras Tuner: throughput, per-trial overhead, GFLOP/s.

    python benchmarks/train_throughput.py            # ~6 minutes
    python benchmarks/train_throughput.py --quick    # ~3 minutes

One process, the same models, data (synthetic 28x28 images, 10 classes) and batch size 64
on each side.
- Throughput: samples/s over whole training epochs (median of epochs after the first, so
  tracing is excluded on both sides), our Trainer against `model.fit` in graph mode and in
  Keras's default (`jit_compile="auto"`); the ratio is against the faster of the two fits.
- Per-trial overhead: from the start of a job to its first finished training step, over the
  same list of configs (MLP, units in {128, 256}, random learning rate and dropout). Keras
  Tuner: `on_trial_begin` to the end of the first batch. Ours: `Trainer.run` entry to the end
  of the first compiled call, which is 32 steps, so ours is an upper bound.
- GFLOP/s: FLOPs per training sample counted from the layer shapes (forward 2*MACs, backward
  twice that), against the measured fp32 GEMM peak of this machine.
Last line: mlp_ratio_vs_fit=… cnn_ratio_vs_fit=… overhead_ratio_vs_kt=… mlp_gflops=…
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

import numpy as np  # noqa: E402

from hpo.config import TrainingConfig  # noqa: E402
from hpo.data import Dataset  # noqa: E402
from hpo.jobs import TrainTask  # noqa: E402
from hpo.models import get_builder  # noqa: E402
from hpo.training.trainer import Trainer  # noqa: E402

BATCH = 64
MLP = {"layers": 1, "units": 256, "dropout": 0.0, "learning_rate": 1e-3, "batch_size": BATCH}
CNN = {"conv_layers": 2, "filters": 16, "kernel_size": 3, "dense_units": 128, "dropout": 0.0,
       "learning_rate": 1e-3, "batch_size": BATCH}


def synthetic(n_train: int, n_val: int = 256) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((n_train + n_val, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, n_train + n_val).astype("int32")
    empty_x, empty_y = x[:0], y[:0]
    return Dataset("synthetic", "numpy", x[:n_train], y[:n_train], x[n_train:], y[n_train:], empty_x, empty_y, 10)


# --- FLOPs --------------------------------------------------------------------------------------

def training_flops_per_sample(model) -> float:
    """Dense and Conv2D multiply-adds from the layer shapes; training = 3x forward."""
    import keras
    macs = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Dense):
            macs += int(np.prod(layer.kernel.shape))
        elif isinstance(layer, keras.layers.Conv2D):
            out_h, out_w = layer.output.shape[1:3]
            macs += int(np.prod(layer.kernel.shape)) * out_h * out_w
    return 3 * 2 * macs


def peak_gflops(seconds: float = 3.0) -> float:
    import tensorflow as tf
    n = 2048
    a = tf.random.normal((n, n))
    b = tf.random.normal((n, n))
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    matmul(a, b).numpy()
    timings = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        matmul(a, b).numpy()
        timings.append(time.perf_counter() - started)
    return 2 * n ** 3 / statistics.median(timings) / 1e9


# --- throughput -----------------------------------------------------------------------------------

def ours_samples_per_s(data: Dataset, builder: str, config: dict, epochs: int, tmp: Path) -> float:
    trainer = Trainer(data, get_builder(builder), TrainingConfig(compile="graph"), {}, "/device:CPU:0")
    task = TrainTask(trial_id=0, config=config, start_epoch=0, end_epoch=epochs, seed=0,
                     checkpoint_out=str(tmp / f"{builder}.npz"))
    seconds = [report.metrics["epoch_seconds"] for report in trainer.run(task)][1:]
    steps = len(data.x_train) // BATCH
    return steps * BATCH / statistics.median(seconds)


class _EpochTimer:
    def __init__(self):
        import keras

        class Timer(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.seconds = []

            def on_epoch_begin(self, epoch, logs=None):
                self._started = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                self.seconds.append(time.perf_counter() - self._started)

        self.callback = Timer()


def fit_samples_per_s(data: Dataset, builder: str, config: dict, epochs: int, jit_compile) -> float:
    import keras
    keras.utils.set_random_seed(0)
    model = get_builder(builder)(config, data.input_shape, data.num_classes)
    model.compile(optimizer=keras.optimizers.Adam(config["learning_rate"]),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=jit_compile)
    timer = _EpochTimer()
    steps = len(data.x_train) // BATCH
    x, y = data.x_train[: steps * BATCH], data.y_train[: steps * BATCH]    # whole batches, as ours
    model.fit(x, y, batch_size=BATCH, epochs=epochs, validation_data=(data.x_val, data.y_val), verbose=0,
              callbacks=[timer.callback], shuffle=True)
    return steps * BATCH / statistics.median(timer.callback.seconds[1:])


# --- per-trial overhead ---------------------------------------------------------------------------

def overhead_configs(n: int) -> list[dict]:
    rng = np.random.default_rng(1)
    return [{**MLP, "units": int(rng.choice([128, 256])), "learning_rate": float(10 ** rng.uniform(-4, -2)),
             "dropout": float(rng.uniform(0, 0.5))} for _ in range(n)]


def ours_overhead(data: Dataset, configs: list[dict], tmp: Path) -> list[float]:
    trainer = Trainer(data, get_builder("mlp"), TrainingConfig(compile="graph"), {}, "/device:CPU:0")
    out = []
    for i, config in enumerate(configs):
        task = TrainTask(trial_id=i, config=config, start_epoch=0, end_epoch=1, seed=i,
                         checkpoint_out=str(tmp / f"o{i}.npz"))
        out.append(next(iter(trainer.run(task))).metrics["startup_seconds"])
    return out


def kt_overhead(data: Dataset, configs: list[dict], tmp: Path) -> list[float]:
    import keras
    import keras_tuner as kt

    starts: dict[str, float] = {}
    firsts: dict[str, float] = {}

    class FirstBatch(keras.callbacks.Callback):
        def __init__(self, trial_id):
            super().__init__()
            self.trial_id = trial_id

        def on_train_batch_end(self, batch, logs=None):
            firsts.setdefault(self.trial_id, time.perf_counter())

    def build(hp):
        index = hp.Int("index", 0, len(configs) - 1)
        config = configs[index]
        model = get_builder("mlp")(config, data.input_shape, data.num_classes)
        model.compile(optimizer=keras.optimizers.Adam(config["learning_rate"]),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        return model

    class Timed(kt.GridSearch):
        def on_trial_begin(self, trial):
            starts[trial.trial_id] = time.perf_counter()
            super().on_trial_begin(trial)

        def run_trial(self, trial, *args, **kwargs):
            kwargs["callbacks"] = [*kwargs.get("callbacks", []), FirstBatch(trial.trial_id)]
            return super().run_trial(trial, *args, **kwargs)

    tuner = Timed(build, objective="val_accuracy", max_trials=len(configs), directory=str(tmp), project_name="kt",
                  overwrite=True)
    with contextlib.redirect_stdout(io.StringIO()):
        tuner.search(data.x_train, data.y_train, epochs=1, batch_size=BATCH, validation_data=(data.x_val, data.y_val),
                     verbose=0)
    return [firsts[t] - starts[t] for t in starts if t in firsts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    n_train, epochs, n_trials = (8192, 4, 8) if args.quick else (16384, 6, 16)
    data = synthetic(n_train)
    print(f"data: {n_train} synthetic 28x28 images, batch {BATCH}, {epochs} epochs per measurement")

    results, ours_sps = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, builder, config in (("mlp", "mlp", MLP), ("cnn", "cnn", CNN)):
            ours = ours_samples_per_s(data, builder, config, epochs, tmp)
            fit_graph = fit_samples_per_s(data, builder, config, epochs, jit_compile=False)
            fit_auto = fit_samples_per_s(data, builder, config, epochs, jit_compile="auto")
            baseline = max(fit_graph, fit_auto)
            results[name], ours_sps[name] = ours / baseline, ours
            print(f"{name}: ours {ours:,.0f} samples/s | model.fit graph {fit_graph:,.0f}, fit default "
                  f"(jit auto) {fit_auto:,.0f} | ratio vs faster fit {results[name]:.2f}", flush=True)

        configs = overhead_configs(n_trials)
        mine = ours_overhead(data, configs, tmp)
        theirs = kt_overhead(data, configs, tmp)
    mine_ms, theirs_ms = 1000 * statistics.median(mine), 1000 * statistics.median(theirs)
    print(f"per-trial overhead (job start to first finished step), median of {len(mine)} trials: "
          f"ours {mine_ms:.0f} ms (first trial of each architecture {1000 * mine[0]:.0f} ms, "
          f"reused programs {1000 * statistics.median(mine[2:]):.0f} ms) vs Keras Tuner {theirs_ms:.0f} ms")

    peak = peak_gflops()
    mlp_flops = training_flops_per_sample(get_builder("mlp")(MLP, (28, 28), 10))
    cnn_flops = training_flops_per_sample(get_builder("cnn")(CNN, (28, 28), 10))
    mlp_gflops, cnn_gflops = ours_sps["mlp"] * mlp_flops / 1e9, ours_sps["cnn"] * cnn_flops / 1e9
    print(f"FLOPs per training sample: mlp {mlp_flops / 1e6:.2f} M, cnn {cnn_flops / 1e6:.2f} M; "
          f"achieved mlp {mlp_gflops:.1f} GFLOP/s, cnn {cnn_gflops:.1f} GFLOP/s; "
          f"measured fp32 GEMM peak {peak:.0f} GFLOP/s (mlp at {100 * mlp_gflops / peak:.0f}% of peak)")
    print(f"mlp_ratio_vs_fit={results['mlp']:.2f} cnn_ratio_vs_fit={results['cnn']:.2f} "
          f"overhead_ratio_vs_kt={mine_ms / theirs_ms:.3f} mlp_gflops={mlp_gflops:.1f}")


if __name__ == "__main__":
    main()
