"""A worker's memory over a long search where most trials are a new architecture.

Drives the real `Trainer` (what the inline backend runs) through `run_group`, one tiny trial
at a time: an MLP of random depth and width (so most trials trace a new program), one epoch
on a few hundred 8x8 digits. A fraction of the trials reuse a recent trial's architecture
with new hyperparameters, as a search's promotions and near neighbours do, so the program
cache has hits to count. Every `--every` trials it records the process's resident memory
(after a garbage collection); at the end it prints trials -> RSS, the ratio of the last
record to the one at `--reference` trials, the program cache's hit rate, and the cost of a
miss: the median trial time of misses (a build and a retrace) less that of hits.

    nice -n 19 python benchmarks/worker_memory.py              # 5,000 trials
    nice -n 19 python benchmarks/worker_memory.py --quick      # 600 trials
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
for _pool in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_pool, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_mb() -> float:
    """This process's resident set, in MB, from /proc (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def tiny_digits(train: int):
    """`train` training examples of sklearn's digits, and a validation split a quarter of that."""
    from hpo.config import DataConfig
    from hpo.data import load_dataset
    from hpo.data.dataset import Dataset

    full = load_dataset(DataConfig(dataset="digits", validation_split=0.2, test_split=0.1), seed=0)
    val = max(1, train // 4)
    return Dataset(full.name, full.source, full.x_train[:train], full.y_train[:train], full.x_val[:val],
                   full.y_val[:val], full.x_test[:val], full.y_test[:val], full.num_classes)


def trial_configs(trials: int, reuse: float, seed: int):
    """`trials` configs: most of a new random architecture (1-3 layers of 8-1024 units, Adam or
    SGD: about 6,000 architectures), a fraction `reuse` of one of the last 40 trials'
    architectures with fresh hyperparameters."""
    rng = random.Random(seed)
    recent: list[dict] = []
    for _ in range(trials):
        if recent and rng.random() < reuse:
            structure = dict(rng.choice(recent[-40:]))
        else:
            structure = {"layers": rng.randint(1, 3), "units": int(round(8 * 128 ** rng.random())),
                         "optimizer": rng.choice(["adam", "sgd"])}
        recent.append(structure)
        yield {**structure, "dropout": rng.uniform(0, 0.3), "learning_rate": 10 ** rng.uniform(-3, -1.5),
               "batch_size": 32, **({"momentum": rng.uniform(0, 0.9)} if structure["optimizer"] == "sgd" else {})}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--every", type=int, default=250, help="record RSS every this many trials")
    parser.add_argument("--reference", type=int, default=500, help="the target compares the last record to this one")
    parser.add_argument("--reuse", type=float, default=0.2, help="fraction of trials on a recent architecture")
    parser.add_argument("--train-examples", type=int, default=256)
    parser.add_argument("--compile", default="graph", help="the trainer's compile mode (graph, xla, auto)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="600 trials, a record every 50")
    parser.add_argument("--json", help="also write the records and summary here")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.every, args.reference = 600, 50, 100

    import tempfile

    from hpo.config import TrainingConfig
    from hpo.jobs import TrainTask, TrialDone
    from hpo.models import get_builder
    from hpo.training.trainer import Trainer

    trainer = Trainer(tiny_digits(args.train_examples), get_builder("mlp"),
                      TrainingConfig(compile=args.compile, batch_size=32), {}, "/device:CPU:0")
    records, seconds = [], {"hit": [], "miss": []}
    failed = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        for trial_id, config in enumerate(trial_configs(args.trials, args.reuse, args.seed)):
            misses = trainer.programs.misses
            task = TrainTask(trial_id=trial_id, config=config, start_epoch=0, end_epoch=1, seed=trial_id,
                             checkpoint_out=os.path.join(scratch, "last.npz"))
            began = time.perf_counter()
            for event in trainer.run_group([task]):
                if isinstance(event, TrialDone) and event.error:
                    failed += 1
                    print(f"trial {trial_id} failed: {event.error}", file=sys.stderr)
            seconds["miss" if trainer.programs.misses > misses else "hit"].append(time.perf_counter() - began)
            done = trial_id + 1
            if done % args.every == 0 or done == args.trials:
                gc.collect()
                records.append({"trials": done, "rss_mb": round(rss_mb(), 1), "programs": len(trainer.programs),
                                "programs_mb": round(trainer.programs.bytes / 2**20, 1),
                                "elapsed_s": round(time.perf_counter() - started, 1)})
                print(json.dumps(records[-1]), flush=True)

    cache = trainer.programs
    hit_rate = cache.hits / max(1, cache.hits + cache.misses)
    miss_cost = (statistics.median(seconds["miss"]) - statistics.median(seconds["hit"])
                 if seconds["miss"] and seconds["hit"] else float("nan"))
    reference = next((r for r in records if r["trials"] >= args.reference), records[0])
    ratio = records[-1]["rss_mb"] / reference["rss_mb"]
    summary = {"trials": args.trials, "failed": failed, "hits": cache.hits, "misses": cache.misses,
               "evictions": cache.evictions, "hit_rate": round(hit_rate, 3),
               "median_hit_s": round(statistics.median(seconds["hit"]), 4) if seconds["hit"] else None,
               "median_miss_s": round(statistics.median(seconds["miss"]), 4) if seconds["miss"] else None,
               "miss_cost_s": round(miss_cost, 4), "capacity": cache.capacity,
               "budget_mb": round(cache.budget_bytes / 2**20, 1) if cache.budget_bytes else None,
               f"rss_{records[-1]['trials']}_over_{reference['trials']}": round(ratio, 3)}
    print("\ntrials  RSS MB  programs  programs MB")
    for r in records:
        print(f"{r['trials']:>6}  {r['rss_mb']:>6.0f}  {r['programs']:>8}  {r['programs_mb']:>11.1f}")
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"records": records, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
