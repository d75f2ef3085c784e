"""Synthetic multi-fidelity problems (shared/benchmarks/mf_functions.md). All minimised.

The budget b runs over [1, 27]; fidelity z = ln(b) / ln(27) and every function is exact at z = 1.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

MAX_BUDGET = 27.0


def fidelity(budget: float) -> float:
    return math.log(budget) / math.log(MAX_BUDGET)


@dataclass(frozen=True)
class Problem:
    name: str
    space: dict[str, Any]
    optimum: float
    # evaluate(config, budget, run_seed) -> observed value (possibly noisy)
    evaluate: Callable[[Mapping[str, Any], float, int], float]
    # exact(config) -> the noise-free value at full fidelity, for regret
    exact: Callable[[Mapping[str, Any]], float]


# --- Branin (2 continuous) ------------------------------------------------------------------

def branin_mf(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
    z = fidelity(budget)
    x1, x2 = config["x1"], config["x2"]
    b = 5.1 / (4 * math.pi ** 2) - 0.01 * (1 - z)
    c = 5 / math.pi - 0.1 * (1 - z)
    t = 1 / (8 * math.pi) + 0.05 * (1 - z)
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


BRANIN = Problem(
    name="branin_mf",
    space={"x1": {"type": "float", "low": -5.0, "high": 10.0}, "x2": {"type": "float", "low": 0.0, "high": 15.0}},
    optimum=0.397887, evaluate=branin_mf, exact=lambda c: branin_mf(c, MAX_BUDGET))

# --- Hartmann 6 (6 continuous) --------------------------------------------------------------

_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
               [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                      [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann6_mf(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
    z = fidelity(budget)
    x = np.array([config[f"x{i}"] for i in range(1, 7)])
    alpha = _ALPHA - 0.1 * (1 - z)
    return float(-(alpha * np.exp(-(_A * (x - _P) ** 2).sum(axis=1))).sum())


HARTMANN6 = Problem(
    name="hartmann6_mf", space={f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(1, 7)},
    optimum=-3.32237, evaluate=hartmann6_mf, exact=lambda c: hartmann6_mf(c, MAX_BUDGET))

# --- Counting ones (8 categorical + 8 continuous; BOHB paper, section 5.1) -----------------------


def counting_ones(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
    """Draws are seeded by (run, config, budget): the same evaluation gives the same value."""
    key = f"{run_seed}|{sorted(config.items())!r}|{budget:.6g}"
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    draws = max(1, int(round(27 * budget)))
    categorical = sum(int(config[f"c{i}"]) for i in range(8))
    continuous = sum(rng.binomial(draws, config[f"u{i}"]) / draws for i in range(8))
    return -(categorical + continuous)


def counting_ones_expected(config: Mapping[str, Any]) -> float:
    """The noise-free value: the mean of the Bernoulli draws is their probability."""
    return -(sum(int(config[f"c{i}"]) for i in range(8)) + sum(config[f"u{i}"] for i in range(8)))


COUNTING_ONES = Problem(
    name="counting_ones",
    space={**{f"c{i}": {"type": "choice", "values": [0, 1]} for i in range(8)},
           **{f"u{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(8)}},
    optimum=-16.0, evaluate=counting_ones, exact=counting_ones_expected)

PROBLEMS = {p.name: p for p in (BRANIN, HARTMANN6, COUNTING_ONES)}
