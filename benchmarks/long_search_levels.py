"""Whether a long search keeps trying the int levels and choices its first winners lacked.

A cheap function of four parameters, `(x - 2)^2 + (log10 y - 0.5)^2 + 0.1 |k - 3| + cost(opt) +
1 / budget`, with `k` an int of 8 levels and `opt` a choice of three (costs 0, 0.3, 0.6): the
optimum is x=2, y=10^0.5, k=3, opt="a", worth 1/27 at the top budget. A search whose early
winners had another level or choice must move off them to get within 0.1 of it. BOHB and
AsyncBOHB (budgets 1-27, eta 3) ask and are told one job at a time, with their default
options and with each variant of `--variants`, the same seeds for each.

    python benchmarks/long_search_levels.py                   # 2,000 asks, seeds 0-11
    python benchmarks/long_search_levels.py --asks 1000 --seeds 4 --variants '{"max_good": null}'

Prints, per searcher and variant: the seeds whose best top-budget value came within 0.1 of the
optimum, the median and mean best, and the median over seeds of the share of the last 500 asks
that went to the most asked (k, opt) pair.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpo.search import BOHB, AsyncBOHB  # noqa: E402

SPACE = {"x": {"type": "float", "low": -5, "high": 10}, "y": {"type": "float", "low": 0.01, "high": 100, "log": True},
         "k": {"type": "int", "low": 1, "high": 8}, "opt": {"type": "choice", "values": ["a", "b", "c"]}}
OPT_COST = {"a": 0.0, "b": 0.3, "c": 0.6}
OPTIMUM = 1 / 27
NEAR = 0.1        # one int level off the optimum costs 0.1, the next-best choice 0.3


def value(config, budget: float) -> float:
    return ((config["x"] - 2) ** 2 + (math.log10(config["y"]) - 0.5) ** 2 + 0.1 * abs(config["k"] - 3)
            + OPT_COST[config["opt"]] + 1.0 / budget)


def run(searcher_class, options: dict, seed: int, asks: int) -> tuple[float, float]:
    """(best top-budget value, the most asked (k, opt) pair's share of the last 500 asks)."""
    searcher = searcher_class(SPACE, seed=seed, min_budget=1, max_budget=27, eta=3, **options)
    best, late = math.inf, Counter()
    for i in range(asks):
        job = searcher.ask()
        loss = value(job.config, job.budget)
        searcher.tell(job, loss)
        if job.budget == 27:
            best = min(best, loss)
        if i >= asks - 500:
            late[(job.config["k"], job.config["opt"])] += 1
    return best, late.most_common(1)[0][1] / sum(late.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--asks", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--variants", nargs="*", default=['{"max_good": null}'],
                        help="JSON options, each run beside the defaults")
    args = parser.parse_args()
    variants = [("default", {})] + [(text, json.loads(text)) for text in args.variants]
    print(f"{args.asks} asks, seeds 0-{args.seeds - 1}; within {NEAR} of the optimum ({OPTIMUM:.4f})")
    print(f"{'searcher':<10} {'options':<22} {'near':>6} {'median best':>12} {'mean best':>10} {'late mode':>10}")
    for searcher_class in (AsyncBOHB, BOHB):
        for name, options in variants:
            outcomes = [run(searcher_class, options, seed, args.asks) for seed in range(args.seeds)]
            bests = np.array([best for best, _ in outcomes])
            near = int((bests - OPTIMUM < NEAR).sum())
            print(f"{searcher_class.__name__:<10} {name:<22} {near:>3}/{args.seeds:<2} {np.median(bests):>12.4f} "
                  f"{bests.mean():>10.4f} {np.median([share for _, share in outcomes]):>10.2f}", flush=True)


if __name__ == "__main__":
    main()
