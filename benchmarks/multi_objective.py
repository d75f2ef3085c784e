"""Several objectives: hpo's multi-objective searchers against Optuna and Syne Tune.

    python -m venv /tmp/mo-bench && /tmp/mo-bench/bin/pip install optuna pymoo scipy PyYAML syne-tune
    PYTHONPATH=. nice -n 10 /tmp/mo-bench/bin/python benchmarks/multi_objective.py --quick

(or `pip install -e .[bench]`). Syne Tune's MO-ASHA runs where it imports and is left out
otherwise.

Problems: bi-objective, both minimised, with a fidelity: the budget b runs over [1, 27] and
z = ln(b) / ln(27); every problem is exact at z = 1 and biased below it, so that a searcher
which trusts low budgets blindly is misled:

- `zdt1_mf`: ZDT1 (6 variables). Below the full budget the distance term g measures
  |x_i - 0.35 (1 - z)| (the front's position shifts towards x_i = 0.35) and f2 carries a
  learning-curve offset 0.5 (1 - z).
- `dtlz2_mf`: two-objective DTLZ2 (6 variables). Below the full budget the optimum of g
  moves by 0.25 (1 - z), the position variable is warped (x0 ** (1 + 1.5 (1 - z)), which
  crowds low budgets towards one end of the front) and both objectives carry 0.3 (1 - z).
- `digits_mlp`: real, tabular (`benchmarks/digits_mlp.py`): scikit-learn MLPs trained on
  the digits over a grid of 300 configs (1-2 layers, 8-128 units, learning rate, L2
  penalty, batch size), their validation accuracy after every epoch 1..27 stored once
  (`python benchmarks/digits_mlp.py` regenerates the table; its generation time is in it).
  f1 = 1 - val_accuracy after `budget` epochs, f2 = log10 of the parameter count; the
  reference point (0.2, 4.5) counts models above 80% accuracy.

`PROBLEMS` holds them.

Accounting is `benchmarks/searchers.py`'s: every searcher gets the same total budget (the
sum of budgets, only the increment where a config already ran at a lower budget), and is
judged by what it trained fully: the configs evaluated at the full budget, whose exact
objectives give the dominated hypervolume against the problem's fixed reference point
(pymoo's `HV`), at 25%, 50% and 100% of the total budget.

Ours: random search (full budget), Hyperband and ASHA (promotion by non-dominated rank,
ties by hypervolume contribution), BOHB and asynchronous BOHB with their model's split by
non-dominated rank (the default) and by ParEGO scalarisation. Peers: Optuna's NSGA-II (population 10: with a few
dozen evaluations the default 50 would never leave its random first generation) and
multi-objective TPE, both at the full budget, Optuna's random search, and Syne Tune's
MO-ASHA (one worker, reporting at the rung budgets; a stopped trial counts what it trained).

Then the median ask() time of BOHB, AsyncBOHB, ASHA and Hyperband with 1,000 finished
trials, with two objectives (zdt1_mf) and three (`dtlz2_3_mf`).

Last line: `hypervolume_ratio_vs_best_peer=` the best of hpo's searchers (judged by its
worst problem) as its mean hypervolume at 100% over the best peer's, worst over problems.
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import digits_mlp as digits_mlp_table  # noqa: E402
from benchmarks.mf_problems import MAX_BUDGET, fidelity  # noqa: E402
from benchmarks.searchers import _suggest, typed  # noqa: E402
from hpo.search import ASHA, BOHB, AsyncBOHB, Hyperband, RandomSearch, rung_budgets  # noqa: E402

ETA, MIN_BUDGET = 3, 1.0
RUNGS = rung_budgets(MIN_BUDGET, MAX_BUDGET, ETA)
OBJECTIVES = ["f1", "f2"]
FRACTIONS = (0.25, 0.5, 1.0)


class BudgetSpent(Exception):
    """Raised inside an objective once the run's total budget is used up."""


@dataclass(frozen=True)
class MOProblem:
    name: str
    space: dict[str, Any]
    reference: tuple[float, float]
    # evaluate(config, budget) -> the observed (f1, f2), biased below the full budget
    evaluate: Callable[[Mapping[str, Any], float], tuple[float, float]]

    def exact(self, config: Mapping[str, Any]) -> tuple[float, float]:
        return self.evaluate(config, MAX_BUDGET)


# --- problems ---------------------------------------------------------------------------------

UNIT6 = {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(6)}


def zdt1_mf(config: Mapping[str, Any], budget: float) -> tuple[float, float]:
    z = fidelity(budget)
    x = np.array([config[f"x{i}"] for i in range(6)])
    g = 1 + 9 / 5 * np.abs(x[1:] - 0.35 * (1 - z)).sum()
    f1 = x[0]
    return float(f1), float(g * (1 - math.sqrt(f1 / g)) + 0.5 * (1 - z))


def dtlz2_mf(config: Mapping[str, Any], budget: float) -> tuple[float, float]:
    z = fidelity(budget)
    x = np.array([config[f"x{i}"] for i in range(6)])
    g = ((x[1:] - 0.5 - 0.25 * (1 - z)) ** 2).sum()
    theta = x[0] ** (1 + 1.5 * (1 - z)) * math.pi / 2
    offset = 0.3 * (1 - z)
    return float((1 + g) * math.cos(theta) + offset), float((1 + g) * math.sin(theta) + offset)


def digits_mlp(config: Mapping[str, Any], budget: float) -> tuple[float, float]:
    error, params = digits_mlp_table.evaluate(config, budget)
    return error, math.log10(params)


PROBLEMS = {p.name: p for p in (
    MOProblem("zdt1_mf", UNIT6, (1.1, 5.0), zdt1_mf),
    MOProblem("dtlz2_mf", UNIT6, (2.0, 2.0), dtlz2_mf),
    MOProblem("digits_mlp", digits_mlp_table.SPACE, (0.2, 4.5), digits_mlp),
)}


# --- accounting -------------------------------------------------------------------------------

@dataclass
class Trace:
    """Every evaluation of one run, in order: the budget spent after it, and the exact
    objectives of the configs evaluated at the full budget."""

    problem: MOProblem
    total_budget: float
    costs: list[float] = field(default_factory=list)
    full: list[tuple[int, tuple[float, float]]] = field(default_factory=list)   # (evaluation index, exact)
    _spent: float = 0.0
    _deepest: dict[str, float] = field(default_factory=dict)

    @property
    def exhausted(self) -> bool:
        return self._spent >= self.total_budget - 1e-9

    def evaluate(self, config: Mapping[str, Any], budget: float) -> tuple[float, float]:
        if self.exhausted:
            raise BudgetSpent()
        values = self.problem.evaluate(config, budget)
        key = repr(sorted(config.items()))
        self._spent += max(0.0, budget - self._deepest.get(key, 0.0))
        self._deepest[key] = max(budget, self._deepest.get(key, 0.0))
        if budget >= MAX_BUDGET - 1e-9:
            self.full.append((len(self.costs), self.problem.exact(config)))
        self.costs.append(self._spent)
        return values

    def hypervolume_at(self, fraction: float) -> float:
        """Hypervolume of the fully trained configs once `fraction` of the budget is spent."""
        last = int(np.searchsorted(self.costs, fraction * self.total_budget - 1e-9, side="left"))
        return hypervolume([point for index, point in self.full if index <= last], self.problem.reference)


def hypervolume(points, reference) -> float:
    from pymoo.indicators.hv import HV
    reference = np.asarray(reference, dtype=float)
    points = np.array([p for p in points if np.all(np.asarray(p) < reference)], dtype=float).reshape(-1, 2)
    return float(HV(ref_point=reference)(points)) if len(points) else 0.0


# --- ours -------------------------------------------------------------------------------------

def run_ours(cls) -> Callable[[MOProblem, int, float], Trace]:
    def run(problem: MOProblem, seed: int, total: float) -> Trace:
        trace = Trace(problem, total)
        searcher = cls(problem.space, seed=seed, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET, eta=ETA,
                       objectives=OBJECTIVES)
        while not trace.exhausted:
            job = searcher.ask()
            searcher.tell(job, list(trace.evaluate(job.config, job.budget)))
        return trace
    return run


def dtlz2_3_mf(config: Mapping[str, Any], budget: float) -> tuple[float, float, float]:
    """Three-objective DTLZ2 (6 variables) with dtlz2_mf's low-budget offset: ask() timing only."""
    z = fidelity(budget)
    x = np.array([config[f"x{i}"] for i in range(6)])
    g = 1 + ((x[2:] - 0.5 - 0.25 * (1 - z)) ** 2).sum()
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    offset = 0.3 * (1 - z)
    return (float(g * math.cos(a) * math.cos(b) + offset), float(g * math.cos(a) * math.sin(b) + offset),
            float(g * math.sin(a) + offset))


def ask_latency_ms(cls, n_objectives: int = 2, observations: int = 1000, repeats: int = 100) -> float:
    """Median ask() time with `observations` finished jobs: zdt1_mf (two objectives) or dtlz2_3_mf (three)."""
    evaluate = PROBLEMS["zdt1_mf"].evaluate if n_objectives == 2 else dtlz2_3_mf
    searcher = cls(UNIT6, seed=0, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET, eta=ETA,
                   objectives=["f1", "f2", "f3"][:n_objectives])
    for _ in range(observations):
        job = searcher.ask()
        searcher.tell(job, list(evaluate(job.config, job.budget)))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        job = searcher.ask()
        times.append(time.perf_counter() - started)
        searcher.tell(job, list(evaluate(job.config, job.budget)))
    return 1000 * statistics.median(times)


# --- Optuna -----------------------------------------------------------------------------------

def run_optuna(kind: str) -> Callable[[MOProblem, int, float], Trace]:
    def run(problem: MOProblem, seed: int, total: float) -> Trace:
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = {"nsga2": lambda: optuna.samplers.NSGAIISampler(population_size=10, seed=seed),
                   "motpe": lambda: optuna.samplers.TPESampler(seed=seed),
                   "random": lambda: optuna.samplers.RandomSampler(seed=seed)}[kind]()
        study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
        trace = Trace(problem, total)
        try:
            while True:
                trial = study.ask()
                study.tell(trial, list(trace.evaluate(_suggest(trial, problem), MAX_BUDGET)))
        except BudgetSpent:
            pass
        return trace
    return run


# --- Syne Tune --------------------------------------------------------------------------------

def run_moasha(problem: MOProblem, seed: int, total: float) -> Trace:
    """MO-ASHA as Syne Tune's Tuner drives it with one worker: a trial reports at each rung
    budget and runs on until the scheduler stops it or it reaches the full budget."""
    from datetime import datetime

    from syne_tune import config_space as cs
    from syne_tune.backend.trial_status import Trial
    from syne_tune.optimizer.scheduler import SchedulerDecision
    from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA

    domains = {}
    for name, spec in problem.space.items():
        if spec["type"] == "float":
            domains[name] = (cs.loguniform if spec.get("log") else cs.uniform)(spec["low"], spec["high"])
        elif spec["type"] == "int":
            domains[name] = (cs.lograndint if spec.get("log") else cs.randint)(spec["low"], spec["high"])
        else:
            domains[name] = cs.choice(spec["values"])
    np.random.seed(seed)           # Syne Tune's domains draw from numpy's global generator
    scheduler = MOASHA(domains, metrics=OBJECTIVES, do_minimize=True, time_attr="epoch", max_t=int(MAX_BUDGET),
                       grace_period=int(MIN_BUDGET), reduction_factor=ETA, random_seed=seed)
    trace = Trace(problem, total)
    trial_id = 0
    try:
        while True:
            suggestion = scheduler.suggest()
            trial = Trial(trial_id=trial_id, config=suggestion.config, creation_time=datetime.now())
            trial_id += 1
            scheduler.on_trial_add(trial)
            config = typed(problem, suggestion.config)
            for budget in RUNGS:
                f1, f2 = trace.evaluate(config, budget)
                result = {"epoch": int(round(budget)), "f1": f1, "f2": f2}
                if budget >= MAX_BUDGET - 1e-9:
                    scheduler.on_trial_complete(trial, result)
                    break
                if scheduler.on_trial_result(trial, result) == SchedulerDecision.STOP:
                    scheduler.on_trial_remove(trial)
                    break
    except BudgetSpent:
        pass
    return trace


def syne_tune_available() -> bool:
    try:
        from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA  # noqa: F401
    except Exception:      # not installed, or an incompatible version
        return False
    return True


SEARCHERS: dict[str, Callable[[MOProblem, int, float], Trace]] = {
    "hpo random": run_ours(RandomSearch),
    "hpo hyperband": run_ours(Hyperband),
    "hpo asha": run_ours(ASHA),
    "hpo bohb (rank)": run_ours(BOHB),
    "hpo bohb (parego)": run_ours(functools.partial(BOHB, split="parego")),
    "hpo async_bohb (rank)": run_ours(AsyncBOHB),
    "hpo async_bohb (parego)": run_ours(functools.partial(AsyncBOHB, split="parego")),
    "optuna nsga2": run_optuna("nsga2"),
    "optuna motpe": run_optuna("motpe"),
    "optuna random": run_optuna("random"),
    "syne-tune moasha": run_moasha,
}
OURS = [name for name in SEARCHERS if name.startswith("hpo ")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="20 full-budget evaluations of budget, 5 seeds, two problems, no latency")
    parser.add_argument("--seeds", type=int, default=None, help="default 10 (quick 5)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from here (default 0)")
    parser.add_argument("--full-evals", type=float, default=None,
                        help="total budget in full-budget evaluations (default 40, quick 20)")
    parser.add_argument("--only", nargs="*", help="run only these searchers")
    parser.add_argument("--problems", nargs="*", help="run only these problems")
    parser.add_argument("--no-latency", action="store_true", help="skip the ask() latency measurement")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    full_evals = args.full_evals or (20 if args.quick else 40)
    seeds = args.seeds or (5 if args.quick else 10)
    total = full_evals * MAX_BUDGET
    names = [n for n in (args.only or list(SEARCHERS)) if n != "syne-tune moasha" or syne_tune_available()]
    if "syne-tune moasha" not in names and not args.only:
        print("syne-tune moasha: left out (Syne Tune does not import here)")
    problem_names = args.problems or (["zdt1_mf", "digits_mlp"] if args.quick else list(PROBLEMS))
    problems = [PROBLEMS[n] for n in problem_names]
    from benchmarks.machine import cpu_description
    print(f"machine: {cpu_description()}")
    print(f"total budget {total:g} per run ({full_evals:g} full-budget evaluations), "
          f"{seeds} seeds from {args.first_seed}, budgets {MIN_BUDGET:g}..{MAX_BUDGET:g}, eta {ETA}")

    hv: dict[tuple[str, str], list[dict[float, float]]] = {}
    for problem in problems:
        for name in names:
            started = time.perf_counter()
            runs = []
            for seed in range(args.first_seed, args.first_seed + seeds):
                trace = SEARCHERS[name](problem, seed, total)
                runs.append({f: trace.hypervolume_at(f) for f in FRACTIONS})
            hv[problem.name, name] = runs
            print(f"  {problem.name:16s} {name:24s} {time.perf_counter() - started:6.1f}s", flush=True)

    print("\nMean ± std dominated hypervolume of the fully trained configs at 25%, 50% and 100% of the "
          "budget (larger is better).\n")
    for problem in problems:
        print(f"**{problem.name}** (reference point {problem.reference})\n")
        print("| searcher | 25% | 50% | 100% |")
        print("| --- | --- | --- | --- |")
        for name in names:
            runs = hv[problem.name, name]
            cells = [f"{np.mean([r[f] for r in runs]):.4f} ± {np.std([r[f] for r in runs]):.3f}" for f in FRACTIONS]
            print(f"| {name} | " + " | ".join(cells) + " |")
        print()

    if not args.no_latency and not args.quick:
        for label, cls in (("BOHB (rank)", BOHB), ("BOHB (parego)", functools.partial(BOHB, split="parego")),
                           ("AsyncBOHB (rank)", AsyncBOHB), ("ASHA", ASHA), ("Hyperband", Hyperband)):
            print(f"{label} ask() median with 1,000 finished trials: two objectives {ask_latency_ms(cls, 2):.2f} ms, "
                  f"three {ask_latency_ms(cls, 3):.2f} ms")
        print()

    def mean_final(problem: MOProblem, name: str) -> float:
        return float(np.mean([r[1.0] for r in hv[problem.name, name]]))

    peers = [n for n in names if n not in OURS]
    ours = [n for n in names if n in OURS]
    if not peers or not ours:
        return
    worst: dict[str, float] = {}
    for name in ours:
        ratios = []
        for problem in problems:
            best_peer = max(peers, key=lambda p: mean_final(problem, p))
            ratios.append(mean_final(problem, name) / max(mean_final(problem, best_peer), 1e-12))
        worst[name] = min(ratios)
    champion = max(worst, key=worst.get)
    for problem in problems:
        best_peer = max(peers, key=lambda p: mean_final(problem, p))
        ours_hv, peer_hv = mean_final(problem, champion), mean_final(problem, best_peer)
        print(f"{problem.name}: {champion} {ours_hv:.4f} vs best peer {peer_hv:.4f} ({best_peer}) "
              f"-> ratio {ours_hv / max(peer_hv, 1e-12):.3f}")
    print("worst ratio over problems, per searcher of ours: "
          + ", ".join(f"{n} {r:.3f}" for n, r in sorted(worst.items(), key=lambda nr: -nr[1])))
    print(f"best of ours: {champion}")
    print(f"hypervolume_ratio_vs_best_peer={worst[champion]:.3f} quick={int(args.quick)}")


if __name__ == "__main__":
    main()
