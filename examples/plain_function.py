"""A plain Python function, two ways: `hpo.optimize`, and a searcher's own ask/tell loop.

    python examples/plain_function.py

The objective is Branin with a fidelity: a low budget sees a shifted, cheaper version
(the budget could be simulation steps, data fraction, epochs...). No TensorFlow is loaded.
"""

import math

import hpo
from hpo.search import BOHB
from hpo.space import SearchSpace

SPACE = {"x1": {"type": "float", "low": -5.0, "high": 10.0},
         "x2": {"type": "float", "low": 0.0, "high": 15.0}}
OPTIMUM = 0.397887


def branin(config, budget, max_budget=27.0):
    x1, x2 = config["x1"], config["x2"]
    shift = 0.1 * (1 - budget / max_budget)       # low fidelity: slightly wrong coefficients
    b, c = 5.1 / (4 * math.pi ** 2) - shift, 5 / math.pi
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def with_optimize(max_trials: int = 200):
    result = hpo.optimize(branin, SPACE, "bohb", min_budget=1, max_budget=27, max_trials=max_trials, seed=0)
    print(f"hpo.optimize: best {result.best_value:.4f} (optimum {OPTIMUM}) at {result.best_config}")
    return result.best_value


def with_ask_and_tell(max_trials: int = 200):
    searcher = BOHB(SearchSpace.from_dict(SPACE), min_budget=1, max_budget=27, eta=3, seed=0)
    for _ in range(max_trials):
        job = searcher.ask()          # Job(trial_id, config, budget, continues, bracket, rung), None: wait
        searcher.tell(job, branin(job.config, job.budget))
    job, result = searcher.best
    print(f"ask/tell:     best {result.value:.4f} at budget {job.budget:g}: {job.config}")
    return result.value


if __name__ == "__main__":
    with_optimize()
    with_ask_and_tell()
