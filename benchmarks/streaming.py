"""Streamed tf.data splits against in-memory arrays: the same MLP, data and batch size.

    python benchmarks/streaming.py            # ~80 s on 2 CPU cores
    python benchmarks/streaming.py --quick

One process. The same synthetic 28x28 images (10 classes) train the same MLP at batch size 64
through hpo's trainer twice per round: once as arrays (copied to the device once, batches
gathered by index inside the compiled call) and once as an unbatched `tf.data.Dataset` of
the same examples (`from_tensor_slices`, batched per call and prefetched by hpo). In each
round the two runs take turns epoch by epoch, so machine load falls on both alike. Throughput is training samples per
second of whole epochs (validation included, as a search runs them), the median over every
epoch after each run's first (tracing excluded).
Last line: streamed_ratio_vs_arrays=… (streamed samples/s over the arrays'; the target is >= 0.75).
`measure_streaming()` returns the figures, `streamed_ratio_vs_arrays()` the last line's (benchmarks/engines.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from hpo.config import TrainingConfig  # noqa: E402
from hpo.data import Dataset, StreamedSplit  # noqa: E402
from hpo.jobs import TrainTask  # noqa: E402
from hpo.models import get_builder  # noqa: E402

BATCH = 64
MLP = {"layers": 1, "units": 256, "dropout": 0.0, "learning_rate": 1e-3, "batch_size": BATCH}


@dataclass(frozen=True)
class StreamingResult:
    arrays_samples_per_s: float
    streamed_samples_per_s: float
    epochs_timed: int                     # per side
    paired_ratio: float                   # median over epoch pairs of streamed/arrays (load drift cancels)

    @property
    def ratio(self) -> float:
        return self.streamed_samples_per_s / self.arrays_samples_per_s


def datasets(n_train: int, n_val: int = 1024) -> tuple[Dataset, Dataset]:
    """The same examples as arrays and as tf.data streams."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.random((n_train + n_val, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, n_train + n_val).astype("int32")
    empty_x, empty_y = x[:0], y[:0]
    arrays = Dataset("synthetic", "numpy", x[:n_train], y[:n_train], x[n_train:], y[n_train:], empty_x, empty_y, 10)

    def stream(first: int, last: int) -> StreamedSplit:
        elements = tf.data.Dataset.from_tensor_slices((x[first:last], y[first:last]))
        return StreamedSplit(elements, last - first, (28, 28), (), "int32")
    streamed = Dataset("synthetic", "tf.data", None, None, None, None, None, None, 10,
                       streams={"train": stream(0, n_train), "validation": stream(n_train, n_train + n_val)})
    return arrays, streamed


def run(data: Dataset, epochs: int, tmp: Path, name: str, steps_per_call: int = 32):
    """hpo's trainer on `data`: a generator of its epochs' reports."""
    from hpo.training.trainer import Trainer

    trainer = Trainer(data, get_builder("mlp"), TrainingConfig(compile="graph", steps_per_call=steps_per_call), {},
                      "/device:CPU:0")
    task = TrainTask(trial_id=0, config=MLP, start_epoch=0, end_epoch=epochs, seed=0,
                     checkpoint_out=str(tmp / f"{name}.npz"))
    return trainer.run(task)


def measure_streaming(n_train: int = 16384, epochs: int = 6, rounds: int = 4) -> StreamingResult:
    """Arrays and streamed, `rounds` runs of `epochs` epochs each; the two runs of a round take
    turns epoch by epoch, so a change in machine load falls on both. The medians, over every
    epoch but each run's first."""
    arrays, streamed = datasets(n_train)
    samples = n_train // BATCH * BATCH
    rates: dict[str, list[float]] = {"arrays": [], "streamed": []}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(rounds):
            runs = {name: run(data, epochs, Path(folder), f"{name}{i}")
                    for name, data in (("arrays", arrays), ("streamed", streamed))}
            for epoch in range(epochs):
                for name, reports in runs.items():
                    seconds = next(reports).metrics["epoch_seconds"]
                    if epoch > 0:           # the first epoch traces the step
                        rates[name].append(samples / seconds)
            for reports in runs.values():
                reports.close()
    pairs = [streamed_rate / arrays_rate for arrays_rate, streamed_rate in zip(rates["arrays"], rates["streamed"])]
    return StreamingResult(statistics.median(rates["arrays"]), statistics.median(rates["streamed"]),
                           len(rates["arrays"]), statistics.median(pairs))


def streamed_ratio_vs_arrays(quick: bool = False) -> float:
    """The figure of this script's last line (what benchmarks/engines.py prints)."""
    return measure_streaming(n_train=4096 if quick else 16384, rounds=2 if quick else 4).ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer examples and rounds")
    args = parser.parse_args()
    result = measure_streaming(n_train=4096 if args.quick else 16384, rounds=2 if args.quick else 4)
    print(f"MLP (1 x 256 units) on 28x28 inputs, batch {BATCH}, compile graph, {result.epochs_timed} epochs timed "
          f"per side")
    print(f"arrays:   {result.arrays_samples_per_s:10.0f} samples/s (median)")
    print(f"streamed: {result.streamed_samples_per_s:10.0f} samples/s (median)")
    print(f"median of the epoch pairs' ratios: {result.paired_ratio:.2f}")
    print(f"streamed_ratio_vs_arrays={result.ratio:.2f}")


if __name__ == "__main__":
    main()
