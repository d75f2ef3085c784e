"""BOHB's models on problems the searcher benchmark does not use (a held-out check that the
default was not fitted to Branin, Hartmann6 and counting ones).

    python benchmarks/bohb_heldout.py          # 20 seeds, ~1 min

Rosenbrock 4-D on [-2, 2] and Ackley 5-D on [-5, 5]. A budget b in [1, 27] sees the
function at x + 0.3 (1 - b/27) with noise of 0.01 (1 - b/27): low budgets are shifted and
noisy. Same accounting as benchmarks/searchers.py: 40 full-budget evaluations of total
budget (increments only), regret of the incumbent (best at the largest budget reached),
mean ± std over seeds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hpo.search import BOHB, Hyperband, RandomSearch  # noqa: E402

MAX_BUDGET, TOTAL = 27.0, 40 * 27.0


def rosenbrock(x: np.ndarray) -> float:
    return float(sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1)))


def ackley(x: np.ndarray) -> float:
    d = len(x)
    return float(-20 * np.exp(-0.2 * np.sqrt((x ** 2).sum() / d)) - np.exp(np.cos(2 * np.pi * x).sum() / d)
                 + 20 + np.e)


PROBLEMS = {"rosenbrock_4d": (rosenbrock, 4, -2.0, 2.0), "ackley_5d": (ackley, 5, -5.0, 5.0)}


def final_regret(make, name: str, seed: int) -> float:
    function, d, low, high = PROBLEMS[name]
    space = {f"x{i}": {"type": "float", "low": low, "high": high} for i in range(d)}
    searcher = make(space, seed=seed, min_budget=1, max_budget=MAX_BUDGET, eta=3)
    noise = np.random.default_rng(seed + 1000)
    spent, deepest, incumbent = 0.0, {}, None
    while spent < TOTAL:
        job = searcher.ask()
        x = np.array([job.config[f"x{i}"] for i in range(d)])
        spent += job.budget - deepest.get(tuple(x), 0.0)
        deepest[tuple(x)] = job.budget
        shift = 1 - job.budget / MAX_BUDGET
        value = function(x + 0.3 * shift) + noise.normal(0, 0.01 * shift + 1e-3)
        searcher.tell(job, value)
        if incumbent is None or job.budget > incumbent[0] or (job.budget == incumbent[0] and value < incumbent[1]):
            incumbent = (job.budget, value, function(x))     # both minima are 0
    return incumbent[2]


def main(seeds: int = 20) -> None:
    makers = {"random": RandomSearch, "hyperband": Hyperband, "bohb (default, gp)": BOHB,
              "bohb (tpe)": lambda *a, **k: BOHB(*a, model="tpe", **k),
              "bohb (tpe, no climbing)": lambda *a, **k: BOHB(*a, model="tpe", climbers=0, **k),
              "bohb (tpe, deepest-first, no probes)":
                  lambda *a, **k: BOHB(*a, model="tpe", rungs="deepest", probe_budgets=False, climbers=0, **k),
              "bohb (paper kde)": lambda *a, **k: BOHB(*a, model="kde", **k)}
    print("| searcher | " + " | ".join(PROBLEMS) + " |")
    print("| --- | " + " | ".join("---" for _ in PROBLEMS) + " |")
    for label, make in makers.items():
        cells = []
        for name in PROBLEMS:
            values = [final_regret(make, name, seed) for seed in range(seeds)]
            cells.append(f"{np.mean(values):.4g} ± {np.std(values):.2g}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
