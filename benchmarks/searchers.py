"""Searchers on synthetic multi-fidelity problems: ours against the published implementations.

    bash benchmarks/setup_bench_env.sh              # once: a venv with the peers (DEHB pins numpy<2)
    .venv-bench/bin/python benchmarks/searchers.py [--quick]

Ours: random, Hyperband, ASHA, BOHB. Peers: Optuna TPE with HyperbandPruner, plain Optuna
TPE, HpBandSter BOHB and Hyperband (name server on 127.0.0.1), DEHB. Every searcher gets
the same total budget (counted as the sum of budgets, only the increment where a config
already ran at a lower budget) on branin_mf, hartmann6_mf and counting_ones, over 10 seeds.
Regret is that of the incumbent: the best config evaluated at the full budget (until the
first full-budget evaluation, the best at the highest budget reached), measured with the
noise-free function at full fidelity.

"Overhead" is measured the same way for every searcher: the run's wall time minus the time
spent inside the objective, per evaluation. For ours it is also shown for ask() alone.
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.mf_problems import MAX_BUDGET, PROBLEMS, Problem  # noqa: E402
from hpo.search import ASHA, BOHB, Hyperband, RandomSearch, rung_budgets  # noqa: E402

ETA, MIN_BUDGET = 3, 1.0
RUNGS = rung_budgets(MIN_BUDGET, MAX_BUDGET, ETA)


class BudgetSpent(Exception):
    """Raised inside an objective once the run's total budget is used up."""


@dataclass
class Trace:
    """Every evaluation of one run, in order, with the cost counted as the budget increment."""

    problem: Problem
    run_seed: int
    total_budget: float
    costs: list[float] = field(default_factory=list)
    regrets: list[float] = field(default_factory=list)
    objective_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    wall: float = 0.0
    _spent: float = 0.0
    _deepest: dict[str, float] = field(default_factory=dict)
    _incumbent: tuple[float, float, float] | None = None   # (budget, observed, exact regret)

    @property
    def exhausted(self) -> bool:
        return self._spent >= self.total_budget - 1e-9

    def evaluate(self, config: Mapping[str, Any], budget: float) -> float:
        if self.exhausted:
            raise BudgetSpent()
        started = time.perf_counter()
        value = self.problem.evaluate(config, budget, self.run_seed)
        key = repr(sorted(config.items()))
        increment = max(0.0, budget - self._deepest.get(key, 0.0))
        self._deepest[key] = max(budget, self._deepest.get(key, 0.0))
        self._spent += increment
        inc = self._incumbent
        if inc is None or budget > inc[0] + 1e-9 or (abs(budget - inc[0]) < 1e-9 and value < inc[1]):
            self._incumbent = (budget, value, self.problem.exact(config) - self.problem.optimum)
        self.costs.append(self._spent)
        self.regrets.append(self._incumbent[2])
        self.objective_seconds += time.perf_counter() - started
        return value

    def finish(self) -> "Trace":
        self.wall = time.perf_counter() - self.started
        return self

    def regret_at(self, fraction: float) -> float:
        """Incumbent regret once `fraction` of the total budget is spent."""
        index = int(np.searchsorted(self.costs, fraction * self.total_budget - 1e-9, side="left"))
        return self.regrets[min(index, len(self.regrets) - 1)]

    @property
    def overhead_ms(self) -> float:
        return 1000 * (self.wall - self.objective_seconds) / max(1, len(self.costs))


def typed(problem: Problem, config: Mapping[str, Any]) -> dict[str, Any]:
    """Peers hand back numpy scalars or strings; cast to the space's own value types."""
    out = {}
    for name, spec in problem.space.items():
        value = config[name]
        if spec["type"] == "choice":
            value = next(v for v in spec["values"] if str(v) == str(value))
        elif spec["type"] == "int":
            value = int(value)
        else:
            value = float(value)
        out[name] = value
    return out


# --- ours -------------------------------------------------------------------------------------

def run_ours(cls) -> Callable[[Problem, int, float], Trace]:
    def run(problem: Problem, seed: int, total: float) -> Trace:
        trace = Trace(problem, seed, total)
        searcher = cls(problem.space, seed=seed, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET, eta=ETA)
        while not trace.exhausted:
            job = searcher.ask()
            searcher.tell(job, trace.evaluate(job.config, job.budget))
        return trace.finish()
    return run


def ask_latency_ms(cls, observations: int = 1000, repeats: int = 200) -> tuple[float, float]:
    """Median ask() time with `observations` finished jobs (hartmann6 space): over all asks,
    and over the asks that proposed a new config (the model-based ones; promotions are cheap)."""
    problem = PROBLEMS["hartmann6_mf"]
    searcher = cls(problem.space, seed=0, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET, eta=ETA)
    for _ in range(observations):
        job = searcher.ask()
        searcher.tell(job, problem.evaluate(job.config, job.budget, 0))
    every, fresh = [], []
    while len(every) < repeats or len(fresh) < repeats // 4:
        started = time.perf_counter()
        job = searcher.ask()
        elapsed = time.perf_counter() - started
        every.append(elapsed)
        if job.continues is None:
            fresh.append(elapsed)
        searcher.tell(job, problem.evaluate(job.config, job.budget, 0))
    return 1000 * statistics.median(every), 1000 * statistics.median(fresh)


# --- Optuna -----------------------------------------------------------------------------------

def _suggest(trial, problem: Problem) -> dict[str, Any]:
    config = {}
    for name, spec in problem.space.items():
        if spec["type"] == "float":
            config[name] = trial.suggest_float(name, spec["low"], spec["high"], log=spec.get("log", False))
        elif spec["type"] == "int":
            config[name] = trial.suggest_int(name, spec["low"], spec["high"], log=spec.get("log", False))
        else:
            config[name] = trial.suggest_categorical(name, spec["values"])
    return config


def run_optuna(pruned: bool) -> Callable[[Problem, int, float], Trace]:
    def run(problem: Problem, seed: int, total: float) -> Trace:
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=int(MAX_BUDGET), reduction_factor=ETA) \
            if pruned else optuna.pruners.NopPruner()
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed), pruner=pruner)
        trace = Trace(problem, seed, total)
        try:
            while True:
                trial = study.ask()
                config = _suggest(trial, problem)
                if not pruned:
                    study.tell(trial, trace.evaluate(config, MAX_BUDGET))
                    continue
                for budget in RUNGS:
                    value = trace.evaluate(config, budget)
                    trial.report(value, step=int(round(budget)))
                    if budget < MAX_BUDGET and trial.should_prune():
                        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                        break
                else:
                    study.tell(trial, value)
        except BudgetSpent:
            pass
        return trace.finish()
    return run


# --- HpBandSter -------------------------------------------------------------------------------

def _configspace(problem: Problem, seed: int):
    import ConfigSpace as CS
    cs = CS.ConfigurationSpace(seed=seed)
    for name, spec in problem.space.items():
        if spec["type"] == "float":
            cs.add(CS.UniformFloatHyperparameter(name, spec["low"], spec["high"], log=spec.get("log", False)))
        elif spec["type"] == "int":
            cs.add(CS.UniformIntegerHyperparameter(name, spec["low"], spec["high"], log=spec.get("log", False)))
        else:
            cs.add(CS.CategoricalHyperparameter(name, [str(v) for v in spec["values"]]))
    return cs


def _teach_serpent_numpy_scalars() -> None:
    """Current ConfigSpace hands out numpy scalars (numpy.str_ for categoricals); HpBandSter's
    Pyro4 transport (serpent) predates that and refuses them. Send them as the plain Python value."""
    import serpent

    def as_builtin(obj, serializer, out, level):
        serializer._serialize(obj.item(), out, level)

    for cls in (np.str_, np.float64, np.float32, np.int64, np.int32, np.bool_):
        serpent.register_class(cls, as_builtin)


def run_hpbandster(algorithm: str) -> Callable[[Problem, int, float], Trace]:
    def run(problem: Problem, seed: int, total: float) -> Trace:
        _teach_serpent_numpy_scalars()
        import hpbandster.core.nameserver as hpns
        from hpbandster.core.worker import Worker
        from hpbandster.optimizers import BOHB as HpBOHB
        from hpbandster.optimizers import HyperBand as HpHyperBand

        for name in ("hpbandster", "Pyro4", "matplotlib"):
            logging.getLogger(name).setLevel(logging.ERROR)
        np.random.seed(seed)   # HpBandSter draws from numpy's global generator
        trace = Trace(problem, seed, total)
        run_id = f"bench-{problem.name}-{seed}-{os.getpid()}"

        class BenchWorker(Worker):
            def compute(self, config, budget, **kwargs):
                if trace.exhausted:
                    return {"loss": float("inf"), "info": "budget spent"}
                return {"loss": trace.evaluate(typed(problem, config), float(budget)), "info": {}}

        server = hpns.NameServer(run_id=run_id, host="127.0.0.1", port=None)
        host, port = server.start()
        worker = BenchWorker(nameserver=host, nameserver_port=port, run_id=run_id)
        worker.run(background=True)
        cls = HpBOHB if algorithm == "bohb" else HpHyperBand
        optimizer = cls(configspace=_configspace(problem, seed), run_id=run_id, nameserver=host,
                        nameserver_port=port, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET, eta=ETA)
        per_bracket = total / (len(RUNGS) * 0.75)        # brackets cost 78-108 here; overshoot, then stop
        try:
            while not trace.exhausted:
                optimizer.run(n_iterations=max(1, int(math.ceil(total / per_bracket))))
        finally:
            optimizer.shutdown(shutdown_workers=True)
            server.shutdown()
        return trace.finish()
    return run


# --- DEHB -------------------------------------------------------------------------------------

def run_dehb(problem: Problem, seed: int, total: float) -> Trace:
    from dehb import DEHB
    trace = Trace(problem, seed, total)
    with tempfile.TemporaryDirectory() as tmp:
        optimizer = DEHB(cs=_configspace(problem, seed), dimensions=len(problem.space), min_fidelity=MIN_BUDGET,
                         max_fidelity=MAX_BUDGET, eta=ETA, n_workers=1, output_path=tmp, seed=seed,
                         save_freq=None, log_level="ERROR")
        while not trace.exhausted:
            job = optimizer.ask()
            config = job["config"]   # a ConfigSpace Configuration (DEHB decodes its vectors itself)
            value = trace.evaluate(typed(problem, dict(config)), float(job["fidelity"]))
            optimizer.tell(job, {"fitness": value, "cost": float(job["fidelity"])})
    return trace.finish()


SEARCHERS: dict[str, Callable[[Problem, int, float], Trace]] = {
    "hpo random": run_ours(RandomSearch),
    "hpo hyperband": run_ours(Hyperband),
    "hpo asha": run_ours(ASHA),
    "hpo bohb": run_ours(BOHB),
    "hpo bohb (paper kde)": run_ours(functools.partial(BOHB, model="kde")),
    "optuna tpe+hyperband": run_optuna(pruned=True),
    "optuna tpe": run_optuna(pruned=False),
    "hpbandster bohb": run_hpbandster("bohb"),
    "hpbandster hyperband": run_hpbandster("hyperband"),
    "dehb": run_dehb,
}
PEERS = [name for name in SEARCHERS if not name.startswith("hpo ")]
FRACTIONS = (0.25, 0.5, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller total budget (about 5 minutes)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--full-evals", type=float, default=None,
                        help="total budget in full-budget evaluations (default 40, quick 20)")
    parser.add_argument("--only", nargs="*", help="run only these searchers")
    parser.add_argument("--png", default="benchmarks/searchers_regret.png")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    full_evals = args.full_evals or (20 if args.quick else 40)
    total = full_evals * MAX_BUDGET
    names = args.only or list(SEARCHERS)
    print(f"total budget {total:g} per run ({full_evals:g} full-budget evaluations), {args.seeds} seeds, "
          f"budgets {MIN_BUDGET:g}..{MAX_BUDGET:g}, eta {ETA}")

    traces: dict[tuple[str, str], list[Trace]] = {}
    for problem in PROBLEMS.values():
        for name in names:
            started = time.perf_counter()
            traces[problem.name, name] = [SEARCHERS[name](problem, seed, total) for seed in range(args.seeds)]
            print(f"  {problem.name:13s} {name:22s} {time.perf_counter() - started:6.1f}s", flush=True)

    print("\nMean ± std regret of the incumbent at 25%, 50% and 100% of the budget; overhead per evaluation "
          "(median over runs, ms)\n")
    for problem in PROBLEMS.values():
        print(f"**{problem.name}**\n")
        print("| searcher | 25% | 50% | 100% | overhead ms/eval |")
        print("| --- | --- | --- | --- | --- |")
        for name in names:
            runs = traces[problem.name, name]
            cells = []
            for fraction in FRACTIONS:
                values = [t.regret_at(fraction) for t in runs]
                cells.append(f"{np.mean(values):.4g} ± {np.std(values):.2g}")
            overhead = statistics.median(t.overhead_ms for t in runs)
            print(f"| {name} | " + " | ".join(cells) + f" | {overhead:.3f} |")
        print()

    for cls in (BOHB, Hyperband, RandomSearch):
        every, fresh = ask_latency_ms(cls)
        print(f"{cls.__name__} ask() median with 1,000 finished trials: {every:.3f} ms "
              f"(new configs only: {fresh:.3f} ms)")
    _plot(traces, names, total, args.png)

    ratios = []
    for problem in PROBLEMS.values():
        ours = np.mean([t.regret_at(1.0) for t in traces.get((problem.name, "hpo bohb"), [])] or [np.nan])
        peers = [np.mean([t.regret_at(1.0) for t in traces[problem.name, p]]) for p in PEERS if p in names]
        if peers:
            best_peer = min(peers)
            ratios.append(ours / best_peer if best_peer > 0 else (1.0 if ours <= best_peer else math.inf))
            print(f"{problem.name}: hpo bohb {ours:.4g} vs best peer {best_peer:.4g} -> ratio {ratios[-1]:.3f}")
    if ratios:
        print(f"worst_ratio_bohb_vs_best_peer={max(ratios):.3f}")


def _plot(traces, names, total, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.linspace(0.02, 1.0, 50)
    fig, axes = plt.subplots(1, len(PROBLEMS), figsize=(6 * len(PROBLEMS), 4.5))
    for ax, problem in zip(np.atleast_1d(axes), PROBLEMS.values()):
        for name in names:
            runs = traces[problem.name, name]
            mean = [np.mean([t.regret_at(f) for t in runs]) for f in grid]
            ax.plot(grid * total, np.maximum(mean, 1e-9), label=name, linestyle="-" if name.startswith("hpo") else "--")
        ax.set_yscale("log")
        ax.set_title(problem.name)
        ax.set_xlabel("budget spent (sum of epochs)")
        ax.set_ylabel("mean regret of incumbent")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
