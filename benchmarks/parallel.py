"""Trials per hour with 2 workers against 1, on this machine's CPU cores.

    python benchmarks/parallel.py              # 48 trials x 3 rounds per setting (~8 min)
    python benchmarks/parallel.py --quick      # 24 trials x 3 rounds (~4 min)
    python benchmarks/parallel.py --backend dask

The same seeded random search (the MLP space of kt_comparison.py, offline MNIST 4,000 /
1,000, batch 64, every trial 3 epochs) runs with `workers: 1` (one process using every
core for TensorFlow's ops) and `workers: 2` (two processes, the cores split between them).
The settings alternate round by round so drift in the machine hits both alike. Random
search asks the same configs whatever the worker count, so both settings do identical
work.

Two rates per run:
- end to end: trials / wall time of the whole `run_experiment`, worker start-up included;
- steady: trials finished after the first one / (last finish - first finish): the rate a
  long search sees, with process start-up, data loading and the first trace left out.
The last line is `speedup_2_workers=` on the steady rate (medians over rounds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.kt_comparison import N_TRAIN, N_VAL, SPACE  # noqa: E402
from benchmarks.machine import cpu_description  # noqa: E402
from hpo.config import experiment_from_dict  # noqa: E402
from hpo.driver.runner import run_experiment  # noqa: E402

EPOCHS = 3


def experiment(workers: int, trials: int, backend: str, study_dir: str, fuse: int | str = 1,
               model_params: dict | None = None, space: dict | None = None):
    """The benchmark's seeded random search; `fused_search.py` fixes the architecture
    (`model_params`, a space without it) and sets `fuse`."""
    return experiment_from_dict({
        "name": f"parallel-{workers}", "seed": 0,
        "data": {"dataset": "benchmarks.kt_comparison:bench_mnist", "validation_split": N_VAL / (N_TRAIN + N_VAL),
                 "test_split": 0.0},
        "model": {"builder": "mlp", "params": model_params or {}}, "space": space or SPACE,
        "search": {"algorithm": "random", "objective": "val_accuracy", "min_budget": EPOCHS,
                   "max_budget": EPOCHS, "max_trials": trials},
        "training": {"batch_size": 64, "optimizer": "adam", "fuse": fuse},
        "execution": {"backend": backend, "workers": workers},
        "output": {"dir": study_dir}})


def one_run(workers: int, trials: int, backend: str, **settings) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        summary, study = run_experiment(experiment(workers, trials, backend, tmp + "/study", **settings))
        wall = time.perf_counter() - started
        rows = study.trials()
        study.close()
    done = [t for t in rows if t.state.value == "complete"]
    if len(done) != trials:
        raise RuntimeError(f"{trials - len(done)} trial(s) did not complete: {[t.error for t in rows if t.error]}")
    finishes = sorted(t.finished_at for t in done)
    span = finishes[-1] - finishes[0]
    return {"wall": wall, "span": span, "end_to_end_per_hour": trials / wall * 3600,
            "steady_per_hour": (trials - 1) / span * 3600}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backend", choices=("local", "dask"), default="local")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trials = 24 if args.quick else 48
    print(f"backend {args.backend}, {trials} trials of {EPOCHS} epochs per run, {args.rounds} rounds, "
          f"{cpu_description()}", flush=True)
    results: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for round_ in range(args.rounds):
        for workers in (1, 2) if round_ % 2 == 0 else (2, 1):
            result = one_run(workers, trials, args.backend)
            results[workers].append(result)
            print(f"round {round_} workers={workers}: wall {result['wall']:.1f}s, trials span "
                  f"{result['span']:.1f}s, {result['steady_per_hour']:.0f} trials/h steady, "
                  f"{result['end_to_end_per_hour']:.0f} end to end", flush=True)

    def median(workers: int, key: str) -> float:
        return statistics.median(r[key] for r in results[workers])

    print("\n| workers | trials/h steady (median) | trials/h end to end (median) | wall s (median) |")
    print("| --- | --- | --- | --- |")
    for workers in (1, 2):
        print(f"| {workers} | {median(workers, 'steady_per_hour'):.0f} | {median(workers, 'end_to_end_per_hour'):.0f}"
              f" | {median(workers, 'wall'):.1f} |")
    end_to_end = median(2, "end_to_end_per_hour") / median(1, "end_to_end_per_hour")
    print(f"end_to_end_speedup_2_workers={end_to_end:.2f}")
    print(f"speedup_2_workers={median(2, 'steady_per_hour') / median(1, 'steady_per_hour'):.2f}")


if __name__ == "__main__":
    main()
