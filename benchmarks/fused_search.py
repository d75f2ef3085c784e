"""Whole searches with and without fused trials, on each backend.

    python benchmarks/fused_search.py              # 96 trials x 2 rounds per setting (~4 min)
    python benchmarks/fused_search.py --trials 48  # shorter searches: start-up weighs more

`benchmarks/fused.py` times fused training jobs inside one process; this runs the whole
`hpo` search a user would: a seeded random search over learning rate and dropout of one
architecture (the MLP 2 x 128 that `fused.py` measures), offline MNIST 4,000 / 1,000, batch
64, every trial 3 epochs. Each backend runs it with `training.fuse: 1` and `auto`:

- `inline`: one process, both cores for TensorFlow's ops;
- `local` and `dask`: two worker processes, one core each, each fusing its own share.

Random search asks the same configs whatever the setting, so both do identical work. The
settings alternate round by round (fuse 1 first, then auto first) so drift in the machine
hits both alike. The rate is end to end: trials / wall time of the whole `run_experiment`,
start-up and compiles included, after one untimed warm-up search. (`parallel.py`'s steady
rate, from the first finish to the last, would flatter fusion: a fused group's trials finish
together, so the span from the first finish leaves the first group's training out.) The last
lines are `fused_search_speedup_<backend>=`, medians over rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_description  # noqa: E402
from benchmarks.parallel import EPOCHS, one_run  # noqa: E402

ARCHITECTURE = {"layers": 2, "units": 128}
SPACE = {"dropout": {"type": "float", "low": 0.0, "high": 0.5},
         "learning_rate": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
WORKERS = {"inline": 1, "local": 2, "dask": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", default="inline,local,dask", help="comma-separated")
    args = parser.parse_args()
    trials = args.trials
    backends = [b for b in args.backends.split(",") if b]
    print(f"MLP {ARCHITECTURE['layers']} x {ARCHITECTURE['units']}, {trials} trials of {EPOCHS} epochs per run, "
          f"{args.rounds} rounds, {cpu_description()}", flush=True)
    results: dict[tuple[str, int | str], list[dict[str, float]]] = {}
    # Untimed: the process's first search pays one-off costs (its first XLA compile, the
    # optimizer probe), which fell on round 0's first setting: 43.0 s against 33.6 s for the
    # same inline `fuse: 1` search run twice in one process.
    one_run(1, 8, "inline", fuse=1, model_params=ARCHITECTURE, space=SPACE)
    for round_ in range(args.rounds):
        for backend in backends:
            for fuse in (1, "auto") if round_ % 2 == 0 else ("auto", 1):
                result = one_run(WORKERS[backend], trials, backend, fuse=fuse, model_params=ARCHITECTURE,
                                 space=SPACE)
                results.setdefault((backend, fuse), []).append(result)
                print(f"round {round_} {backend} fuse={fuse}: wall {result['wall']:.1f}s, "
                      f"{result['end_to_end_per_hour']:,.0f} trials/h", flush=True)

    def median(backend: str, fuse: int | str, key: str) -> float:
        return statistics.median(r[key] for r in results[(backend, fuse)])

    print("\n| backend (workers) | wall s, fuse 1 / auto | trials/h, fuse 1 / auto | speedup |")
    print("| --- | --- | --- | --- |")
    for backend in backends:
        w1, wa = median(backend, 1, "wall"), median(backend, "auto", "wall")
        e1, ea = median(backend, 1, "end_to_end_per_hour"), median(backend, "auto", "end_to_end_per_hour")
        print(f"| {backend} ({WORKERS[backend]}) | {w1:.1f} / {wa:.1f} | {e1:,.0f} / {ea:,.0f} | {ea / e1:.2f} |")
    for backend in backends:
        print(f"fused_search_speedup_{backend}="
              f"{median(backend, 'auto', 'end_to_end_per_hour') / median(backend, 1, 'end_to_end_per_hour'):.2f}")


if __name__ == "__main__":
    main()
