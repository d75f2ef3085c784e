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


def is_active(spec: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
    """Whether a parameter's `when` holds in `config` (a parent absent from it holds no value)."""
    for parent, allowed in spec.get("when", {}).items():
        allowed = allowed if isinstance(allowed, (list, tuple)) else [allowed]
        if parent not in config or config[parent] not in allowed:
            return False
    return True


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


# --- Problems of the robustness suite ------------------------------------------------------------
# Every family below comes in several instances. The TUNING instances may be looked at while
# choosing a searcher's defaults; the HELD_OUT instances are only ever reported, so a default
# that was fitted to the tuning set shows it there.

def _noise(run_seed: int, config: Mapping[str, Any], budget: float) -> np.random.Generator:
    """Noise seeded by the evaluation: the same config at the same budget in a run repeats."""
    key = f"{run_seed}|{sorted(config.items())!r}|{budget:.6g}"
    return np.random.default_rng(zlib.crc32(key.encode()))


def flat(space: Mapping[str, Any]) -> dict[str, Any]:
    """The space as peers without conditionals see it: every parameter always present."""
    return {name: {k: v for k, v in spec.items() if k != "when"} for name, spec in space.items()}


def branch_reversal(name: str, branches: int, strength: float, conditional: bool, seed: int) -> Problem:
    """A categorical `branch` picks which two continuous parameters matter. At the full budget
    branch 0 is best and branch k-1 worst (offsets 0, 0.6, 1.2, ...); at budget 1 the offsets
    are scaled by 1 - 2 * strength: strength 0.5 ties the branches there, 1 reverses their
    order exactly, 1.5 reverses it with 2x the spread. Within a branch a bowl whose centre
    drifts with the fidelity, plus a learning-curve term equal for every config."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0.15, 0.85, size=(branches, 2))
    drift = rng.uniform(-0.15, 0.15, size=(branches, 2))
    widths = rng.uniform(1.5, 4.0, size=branches)
    offsets = 0.6 * np.arange(branches)
    labels = [f"b{i}" for i in range(branches)]

    def evaluate(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        z = fidelity(budget)
        i = labels.index(config["branch"])
        x = np.array([config[f"{labels[i]}_x"], config[f"{labels[i]}_y"]])
        centre = centres[i] + drift[i] * (1 - z)
        bowl = widths[i] * float(((x - centre) ** 2).sum()) - 0.1 * math.cos(8 * (x[0] - centre[0]))
        offset = offsets[i] * (1 - 2 * strength * (1 - z))
        return bowl + offset + 1.5 * (1 - z) + 0.1

    space: dict[str, Any] = {"branch": {"type": "choice", "values": labels}}
    for label in labels:
        for axis in ("x", "y"):
            space[f"{label}_{axis}"] = {"type": "float", "low": 0.0, "high": 1.0,
                                        **({"when": {"branch": label}} if conditional else {})}
    # At the full budget branch 0 has offset 0 and its centre lies inside the box, where the bowl
    # and the ripple are both least: the optimum is 0 there (the other branches add 0.6 and more).
    return Problem(name=name, space=space, optimum=0.0, evaluate=evaluate, exact=lambda c: evaluate(c, MAX_BUDGET))


def branch_shapes(name: str, sizes: tuple[int, ...], strength: float, power: float, seed: int) -> Problem:
    """Branch reversal of another shape: branch i has `sizes[i]` continuous parameters (declared
    with `when`), and the branch offsets (0, 0.6, 1.2, ... at the full budget) are scaled by
    1 - 2 * strength * (1 - z) ** power at fidelity z: power > 1 makes the reversal fade
    before the top budget (the middle budgets already rank the branches nearly right), power
    < 1 keeps it up to the top. Within a branch a bowl with a ripple whose centre drifts with
    the fidelity, plus a learning-curve term equal for every config; the optimum is 0 (branch
    0 at its centre)."""
    rng = np.random.default_rng(seed)
    centres = [rng.uniform(0.15, 0.85, size=k) for k in sizes]
    drift = [rng.uniform(-0.15, 0.15, size=k) for k in sizes]
    widths = rng.uniform(1.5, 4.0, size=len(sizes))
    labels = [f"b{i}" for i in range(len(sizes))]
    names = [[f"{label}_x{j}" for j in range(k)] for label, k in zip(labels, sizes)]

    def evaluate(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        z = fidelity(budget)
        i = labels.index(config["branch"])
        x = np.array([config[n] for n in names[i]])
        centre = centres[i] + drift[i] * (1 - z)
        bowl = widths[i] * float(((x - centre) ** 2).sum()) - 0.1 * math.cos(8 * (x[0] - centre[0]))
        offset = 0.6 * i * (1 - 2 * strength * (1 - z) ** power)
        return bowl + offset + 1.5 * (1 - z) + 0.1

    space: dict[str, Any] = {"branch": {"type": "choice", "values": labels}}
    for label, branch_names in zip(labels, names):
        for n in branch_names:
            space[n] = {"type": "float", "low": 0.0, "high": 1.0, "when": {"branch": label}}
    return Problem(name=name, space=space, optimum=0.0, evaluate=evaluate, exact=lambda c: evaluate(c, MAX_BUDGET))


def lr_trap(name: str, dims: int, strength: float, seed: int) -> Problem:
    """A log-scale `lr` whose best value moves with the budget, as a learning rate that wins
    after one epoch and loses after thirty: the optimum in log10(lr) sits at -3 at the full
    budget and at -3 + 2 * strength at budget 1. The other `dims - 1` parameters form a
    rotated quadratic whose curvature depends on lr (too large an lr also hurts them)."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0.2, 0.8, size=dims - 1)
    rotation, _ = np.linalg.qr(rng.normal(size=(dims - 1, dims - 1)))
    scales = np.geomspace(1.0, 8.0, dims - 1)

    def evaluate(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        z = fidelity(budget)
        log_lr = math.log10(config["lr"])
        best_lr = -3.0 + 2.0 * strength * (1 - z)
        x = np.array([config[f"w{j}"] for j in range(dims - 1)])
        quad = float((scales * (rotation @ (x - centre)) ** 2).sum())
        return 0.4 * (log_lr - best_lr) ** 2 + quad * (1 + 0.3 * max(0.0, log_lr + 3.0)) + 2.0 * (1 - z)

    space = {"lr": {"type": "float", "low": 1e-5, "high": 1.0, "log": True},
             **{f"w{j}": {"type": "float", "low": 0.0, "high": 1.0} for j in range(dims - 1)}}
    optimum = evaluate({"lr": 1e-3, **{f"w{j}": float(centre[j]) for j in range(dims - 1)}}, MAX_BUDGET)
    return Problem(name=name, space=space, optimum=optimum, evaluate=evaluate,
                   exact=lambda c: evaluate(c, MAX_BUDGET))


def shifted(name: str, function: Callable[[np.ndarray], float], bounds: list[tuple[float, float]],
            optimum: float, shift: float, noise: float = 0.0) -> Problem:
    """A smooth function; budget b sees it at x + shift (1 - z) (in units of each range) with
    Gaussian noise of sd `noise` / sqrt(b), seeded by the evaluation."""
    names = [f"x{i + 1}" for i in range(len(bounds))]
    span = np.array([hi - lo for lo, hi in bounds])

    def evaluate(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        x = np.array([config[n] for n in names]) + shift * (1 - fidelity(budget)) * span
        value = function(x)
        if noise:
            value += float(_noise(run_seed, config, budget).normal(0.0, noise / math.sqrt(budget)))
        return value

    def exact(config: Mapping[str, Any]) -> float:
        return function(np.array([config[n] for n in names]))

    space = {n: {"type": "float", "low": float(lo), "high": float(hi)} for n, (lo, hi) in zip(names, bounds)}
    return Problem(name=name, space=space, optimum=optimum, evaluate=evaluate, exact=exact)


_A3 = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
_P3 = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]])


def hartmann3(x: np.ndarray) -> float:
    return float(-(_ALPHA * np.exp(-(_A3 * (x - _P3) ** 2).sum(axis=1))).sum())


def branin(x: np.ndarray) -> float:
    return branin_mf({"x1": x[0], "x2": x[1]}, MAX_BUDGET)


def six_hump_camel(x: np.ndarray) -> float:
    a, b = x
    return float((4 - 2.1 * a ** 2 + a ** 4 / 3) * a ** 2 + a * b + (-4 + 4 * b ** 2) * b ** 2)


def styblinski_tang(x: np.ndarray) -> float:
    return float(0.5 * (x ** 4 - 16 * x ** 2 + 5 * x).sum())


def rosenbrock(x: np.ndarray) -> float:
    return float(sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1)))


def levy(x: np.ndarray) -> float:
    w = 1 + (x - 1) / 4
    return float(math.sin(math.pi * w[0]) ** 2
                 + ((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(math.pi * w[:-1] + 1) ** 2)).sum()
                 + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2))


# The noisy problems: function, bounds, optimum, shift and noise sd ("noisy_<key>").
_NOISY = {
    "branin": (branin, [(-5, 10), (0, 15)], 0.397887, 0.02, 3.0),
    "styblinski3": (styblinski_tang, [(-5, 5)] * 3, -39.16617 * 3, 0.03, 4.0),
    "levy4": (levy, [(-10, 10)] * 4, 0.0, 0.03, 2.0),
}


def noisy(key: str, noise: bool = True) -> Problem:
    """The noisy problem `key` of _NOISY ("noisy_<key>"), or with noise False its noise-free
    twin ("<key>_twin"): the same function, bounds, optimum and shift."""
    function, bounds, optimum, shift, sd = _NOISY[key]
    return shifted(f"noisy_{key}" if noise else f"{key}_twin", function, bounds, optimum, shift=shift,
                   noise=sd if noise else 0.0)


_TUNING_NEW = [
    branch_reversal("branch3_rev", 3, 1.0, conditional=True, seed=1),
    branch_reversal("branch3_rev_flat", 3, 1.0, conditional=False, seed=1),
    lr_trap("lr_trap3", 3, 1.0, seed=2),
    shifted("hartmann3_mf", hartmann3, [(0, 1)] * 3, -3.86278, shift=0.05),
    noisy("branin"),
]
HELD_OUT = [
    branch_reversal("branch4_strong", 4, 1.5, conditional=True, seed=11),
    branch_reversal("branch4_strong_flat", 4, 1.5, conditional=False, seed=11),
    branch_reversal("branch3_mild", 3, 0.6, conditional=True, seed=12),
    lr_trap("lr_trap4_mild", 4, 0.6, seed=13),
    lr_trap("lr_trap2_strong", 2, 1.5, seed=14),
    shifted("camel2_mf", six_hump_camel, [(-2, 2), (-1, 1)], -1.031628, shift=0.04),
    noisy("styblinski3"),
    shifted("rosenbrock3_mf", rosenbrock, [(-2, 2)] * 3, 0.0, shift=0.05),
]
# A second held-out set: other shapes of the same traps, first run by ours only after the
# climbing bracket was chosen; both held-out sets were looked at while later defaults were chosen.
HELD_OUT_2 = [
    branch_shapes("branch3_late", (2, 2, 2), 1.3, power=0.5, seed=21),
    branch_shapes("branch3_uneven", (1, 2, 3), 0.9, power=1.0, seed=22),
    lr_trap("lr_trap5", 5, 1.2, seed=23),
    noisy("levy4"),
]
# The noisy problems without their noise: whether a searcher's cost there comes from the noise
# or from the function (never part of the suite's ratios).
NOISE_FREE_TWINS = {f"{key}_twin": noisy(key, noise=False) for key in _NOISY}
TUNING = {p.name: p for p in (BRANIN, HARTMANN6, COUNTING_ONES, *_TUNING_NEW)}
HELD_OUT_PROBLEMS = {p.name: p for p in HELD_OUT}
HELD_OUT_2_PROBLEMS = {p.name: p for p in HELD_OUT_2}
ALL_PROBLEMS = {**TUNING, **HELD_OUT_PROBLEMS, **HELD_OUT_2_PROBLEMS}
