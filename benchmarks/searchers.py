"""Searchers on synthetic multi-fidelity problems: ours against the published implementations.

    bash benchmarks/setup_bench_env.sh              # once: a venv with the peers (DEHB pins numpy<2)
    nice -n 10 .venv-bench/bin/python benchmarks/searchers.py --quick --cache /tmp/peer-cache

Ours: random, Hyperband, ASHA, BOHB. Peers: Optuna TPE with HyperbandPruner, plain Optuna
TPE, HpBandSter BOHB and Hyperband (name server on 127.0.0.1), DEHB, SMAC3's multi-fidelity
facade and Syne Tune's BOHB (each in a venv of its own: `.venv-bench-smac`, `.venv-bench-syne`). Every searcher gets
the same total budget (counted as the sum of budgets, only the increment where a config
already ran at a lower budget), over 20 seeds. Regret is that of the incumbent: the best
config evaluated at the full budget (until the first full-budget evaluation, the best at
the highest budget reached), measured with the noise-free function at full fidelity.

Problems (`benchmarks/mf_problems.py`): the tuning set, which a default may be chosen on
(branin_mf, hartmann6_mf, counting_ones, a branch-reversal problem declared with `when`
and flat, a learning-rate trap, hartmann3, a noisy Branin), a first held-out set of other
instances of the same families (other strengths, dimensions and seeds, other smooth
functions), since looked at while choosing defaults, and a second held-out set of other
shapes (`--set heldout2`), each reported separately: the last line gives
`worst_ratio_bohb_vs_best_peer=` over every problem, `worst_ratio_heldout_first=` and
`worst_ratio_heldout=` (the second set). On conditional problems the peers see the flat
space; ours see it as declared.

`--cache DIR` keeps the peers' outcomes on disk (per peer, problem, seed and budget): they
are the slow part and do not change while ours are tuned. Every searcher's run repeats
with its seed: Optuna's study is named after the problem and seed (its Hyperband pruner
assigns trials to brackets by a hash of that name), and Syne Tune's BOHB also gets numpy's
global generator seeded. Each problem's ratio comes with a 95% bootstrap interval over
the seeds.

"Overhead" is measured the same way for every searcher: the run's wall time minus the time
spent inside the objective, per evaluation. For ours it is also shown for ask() alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
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

from benchmarks.mf_problems import (  # noqa: E402
    ALL_PROBLEMS,
    HELD_OUT_2_PROBLEMS,
    HELD_OUT_PROBLEMS,
    MAX_BUDGET,
    NOISE_FREE_TWINS,
    TUNING,
    Problem,
    flat,
    is_active,
)
from hpo.search import ASHA, BOHB, FreezeThaw, Hyperband, RandomSearch, rung_budgets  # noqa: E402
from hpo.trial import TrialResult  # noqa: E402

# BOHB's options for "hpo bohb", as JSON (e.g. '{"model": "tpe"}'): a variant measured under the
# default's name, so every report and ratio reads it as ours. Empty: the default.
BOHB_OPTIONS: dict[str, Any] = json.loads(os.environ.get("HPO_BOHB_OPTIONS") or "{}")

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

def told_the_budget(searcher, total: float, options: dict | None = None):
    """`searcher`, told the budget the whole run will spend where it plans for one, as the
    runner tells it `search.total_budget` (the benchmarks' runs stop at a budget too); an
    explicit `total_budget` option (HPO_BOHB_OPTIONS, `null` included) wins."""
    if getattr(searcher, "plans_total_budget", False) and "total_budget" not in (options or {}):
        searcher.plan_total_budget(total)
    return searcher


def run_ours(cls) -> Callable[[Problem, int, float], Trace]:
    def run(problem: Problem, seed: int, total: float) -> Trace:
        trace = Trace(problem, seed, total)
        searcher = told_the_budget(cls(problem.space, seed=seed, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET,
                                       eta=ETA), total, getattr(cls, "keywords", None))
        while not trace.exhausted:
            job = searcher.ask()
            searcher.tell(job, trace.evaluate(job.config, job.budget))
        return trace.finish()
    return run


def run_ours_with_curves(cls) -> Callable[[Problem, int, float], Trace]:
    """Ours, told every epoch's value as the runner tells a learning-curve searcher
    (`TrialResult.curve`). The epochs before a job's last are charged with it (the trace
    counts the increment), as training pays for them once."""
    def run(problem: Problem, seed: int, total: float) -> Trace:
        trace = Trace(problem, seed, total)
        searcher = told_the_budget(cls(problem.space, seed=seed, min_budget=MIN_BUDGET, max_budget=MAX_BUDGET,
                                       eta=ETA), total, getattr(cls, "keywords", None))
        reached: dict[int, float] = {}
        while not trace.exhausted:
            job = searcher.ask()
            start = reached.get(job.continues, 0.0)
            curve = [problem.evaluate(job.config, float(epoch), seed)
                     for epoch in range(int(start) + 1, int(math.ceil(job.budget)))]
            curve.append(trace.evaluate(job.config, job.budget))
            reached[job.trial_id] = job.budget
            searcher.tell(job, TrialResult(value=curve[-1], curve=tuple(curve)))
        return trace.finish()
    return run


def ask_latency_ms(cls, observations: int = 1000, repeats: int = 200) -> tuple[float, float]:
    """Median ask() time with `observations` finished jobs (hartmann6 space): over all asks,
    and over the asks that proposed a new config (the model-based ones; promotions are cheap)."""
    problem = ALL_PROBLEMS["hartmann6_mf"]
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
    """Optuna define-by-run: a parameter is suggested only where its `when` holds (a space
    lists parents before their children; a flat space suggests every parameter)."""
    config: dict[str, Any] = {}
    for name, spec in problem.space.items():
        if not is_active(spec, config):
            continue
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
        pruner = optuna.pruners.HyperbandPruner(min_resource=max(1, int(round(MIN_BUDGET))),
                                                max_resource=int(MAX_BUDGET), reduction_factor=ETA) \
            if pruned else optuna.pruners.NopPruner()
        # The pruner assigns trials to brackets by a hash of the study's name, which is random
        # unless given: named after the problem and seed, a run repeats.
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed), pruner=pruner,
                                    study_name=f"{problem.name}-{seed}")
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

        # A free port: runs side by side must not clash.
        server = hpns.NameServer(run_id=run_id, host="127.0.0.1", port=0)
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


# --- SMAC3 -------------------------------------------------------------------------------------

def run_smac(problem: Problem, seed: int, total: float) -> Trace:
    """SMAC3's multi-fidelity facade: Hyperband with a random forest (each evaluation from
    scratch, so the trace counts a re-run config's budget increment as for everyone)."""
    from smac import MultiFidelityFacade, Scenario
    from smac.runhistory.dataclasses import TrialValue

    for name in ("smac", "ConfigSpace"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trace = Trace(problem, seed, total)
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Scenario(_configspace(problem, seed), deterministic=True, n_trials=10 ** 6, min_budget=MIN_BUDGET,
                            max_budget=MAX_BUDGET, seed=seed, output_directory=Path(tmp))
        intensifier = MultiFidelityFacade.get_intensifier(scenario, eta=ETA)
        smac = MultiFidelityFacade(scenario, target_function=lambda config, seed=0, budget=1.0: 0.0,
                                   intensifier=intensifier, overwrite=True, logging_level=40)
        while not trace.exhausted:
            info = smac.ask()
            value = trace.evaluate(typed(problem, dict(info.config)), float(info.budget))
            smac.tell(info, TrialValue(cost=value))
    return trace.finish()


# --- Syne Tune -------------------------------------------------------------------------------

def run_syne_bohb(problem: Problem, seed: int, total: float) -> Trace:
    """Syne Tune's BOHB: its KDE searcher with asynchronous successive halving (stopping
    type), one trial at a time, results reported at the rung budgets as for Optuna's pruner."""
    from datetime import datetime

    from syne_tune.backend.trial_status import Trial
    from syne_tune.config_space import choice, loguniform, uniform
    from syne_tune.optimizer.baselines import BOHB as SyneBOHB
    from syne_tune.optimizer.scheduler import SchedulerDecision

    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    np.random.seed(seed)   # besides random_seed, Syne Tune's BOHB draws from numpy's global generator
    space = {}
    for name, spec in problem.space.items():
        if spec["type"] == "choice":
            space[name] = choice(list(spec["values"]))
        else:
            space[name] = (loguniform if spec.get("log") else uniform)(spec["low"], spec["high"])
    scheduler = SyneBOHB(space, metric="loss", time_attr="budget", max_t=int(MAX_BUDGET), do_minimize=True,
                         random_seed=seed, grace_period=int(MIN_BUDGET), reduction_factor=ETA)
    trace = Trace(problem, seed, total)
    trial_id = 0
    try:
        while True:
            suggestion = scheduler.suggest()
            trial = Trial(trial_id=trial_id, config=suggestion.config, creation_time=datetime.now())
            trial_id += 1
            scheduler.on_trial_add(trial)
            config = typed(problem, suggestion.config)
            for budget in RUNGS:
                result = {"loss": trace.evaluate(config, budget), "budget": int(round(budget))}
                if budget >= MAX_BUDGET:
                    scheduler.on_trial_complete(trial, result)
                elif scheduler.on_trial_result(trial, result) == SchedulerDecision.STOP:
                    break
    except BudgetSpent:
        pass
    return trace.finish()


SEARCHERS: dict[str, Callable[[Problem, int, float], Trace]] = {
    "hpo random": run_ours(RandomSearch),
    "hpo hyperband": run_ours(Hyperband),
    "hpo asha": run_ours(ASHA),
    "hpo bohb": run_ours(functools.partial(BOHB, **BOHB_OPTIONS)),
    "hpo bohb (paper kde)": run_ours(functools.partial(BOHB, model="kde")),
    "hpo bohb (no climbing)": run_ours(functools.partial(BOHB, model="tpe", climbers=0)),
    "hpo bohb (deepest-first)": run_ours(functools.partial(BOHB, model="tpe", rungs="deepest", probe_budgets=False,
                                                           climbers=0)),
    "hpo freeze_thaw": run_ours_with_curves(FreezeThaw),
    "hpo freeze_thaw (finals only)": run_ours(FreezeThaw),
    "optuna tpe+hyperband": run_optuna(pruned=True),
    "optuna tpe": run_optuna(pruned=False),
    "hpbandster bohb": run_hpbandster("bohb"),
    "hpbandster hyperband": run_hpbandster("hyperband"),
    "dehb": run_dehb,
    "smac3 hyperband+rf": run_smac,
    "syne tune bohb": run_syne_bohb,
}
PEERS = [name for name in SEARCHERS if not name.startswith("hpo ")]
FRACTIONS = (0.25, 0.5, 1.0)
GRID = tuple(float(f) for f in np.round(np.linspace(0.02, 1.0, 50), 4))


@dataclass(frozen=True)
class Outcome:
    """What the tables and the plot need from one run."""

    regret: dict[float, float]           # fraction of the total budget -> incumbent regret
    overhead_ms: float

    @classmethod
    def of(cls, trace: Trace) -> "Outcome":
        return cls({f: trace.regret_at(f) for f in sorted(set(FRACTIONS) | set(GRID))}, trace.overhead_ms)


def run_once(name: str, problem: Problem, seed: int, total: float) -> Outcome:
    # Peers have no conditionals: they see every parameter and the objective ignores the
    # inactive ones. Ours see the space as declared (with `when` on the conditional problems).
    if name not in PEERS:
        return Outcome.of(SEARCHERS[name](problem, seed, total))
    return Outcome.of(SEARCHERS[name](dataclasses.replace(problem, space=flat(problem.space)), seed, total))


# How each peer is driven, where that changed its runs: the version is in the cache file's
# name, so a cache never mixes runs of two drivers (version 2: the runs repeat per seed).
DRIVER_VERSIONS = {"optuna tpe+hyperband": 2, "syne tune bohb": 2}


class PeerCache:
    """Peers' outcomes on disk, one JSON file per peer: they do not change while ours are
    tuned, and they are the slow part of the benchmark. One file per peer and problem (so runs
    split by problem can fill one cache side by side), keyed by seed and budget."""

    def __init__(self, folder: str | None, only_cached: bool = False, run=None, peers=None):
        self.folder = Path(folder) if folder else None
        self.only_cached = only_cached
        # Another benchmark (`published.py`) brings its own runner and peers.
        self._run = run or run_once
        self._peers = PEERS if peers is None else peers
        self._data: dict[tuple[str, str], dict[str, Any]] = {}

    def _file(self, name: str, problem: str) -> Path:
        version = f"-v{DRIVER_VERSIONS[name]}" if name in DRIVER_VERSIONS else ""
        return self.folder / ("".join(c if c.isalnum() else "_" for c in f"{name}-{problem}{version}") + ".json")

    def _load(self, name: str, problem: str) -> dict[str, Any]:
        if (name, problem) not in self._data:
            path = self._file(name, problem)
            self._data[name, problem] = json.loads(path.read_text()) if path.exists() else {}
        return self._data[name, problem]

    def get(self, name: str, problem: Problem, seed: int, total: float) -> Outcome | None:
        """The outcome (None: not in the cache and `only_cached`)."""
        if self.folder is None or name not in self._peers:
            return self._run(name, problem, seed, total)
        data, key = self._load(name, problem.name), f"{seed}|{total:g}"
        if key not in data and self.only_cached:
            return None
        if key not in data:
            outcome = self._run(name, problem, seed, total)
            data[key] = {"regret": [[f, r] for f, r in outcome.regret.items()], "overhead_ms": outcome.overhead_ms}
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self._file(name, problem.name)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(path)
        entry = data[key]
        return Outcome({f: r for f, r in entry["regret"]}, entry["overhead_ms"])


def held_out_mark(name: str) -> str:
    if name in HELD_OUT_2_PROBLEMS:
        return " (held out, second set)"
    return " (held out)" if name in HELD_OUT_PROBLEMS else ""


def mean_final(outcomes: list[Outcome]) -> float:
    return float(np.mean([o.regret[1.0] for o in outcomes]))


def regret_ratio(ours, peer) -> np.ndarray:
    """ours / peer mean final regret, elementwise; where the peer's is 0 (it found the optimum):
    1 if ours is 0 too, else inf."""
    ours, peer = np.asarray(ours, dtype=float), np.asarray(peer, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(peer > 0, ours / peer, np.where(ours <= peer, 1.0, np.inf))


def ratio_interval(ours: list[Outcome], peer: list[Outcome], resamples: int = 2000) -> tuple[float, float]:
    """95% bootstrap interval of mean(ours) / mean(peer) final regret (fixed generator, so the
    output repeats). Each side's seeds are resampled on their own: two runs with one seed
    share the problem's noise draws but not a trajectory, so pairing them would claim a
    link that is not there. It shows whether a ratio's distance from 1 is more than the
    seeds' spread; it leaves out that the best peer is itself the lowest of several noisy
    means, which favours the peers. A zero peer mean counts as in `regret_ratio`."""
    rng = np.random.default_rng(0)
    a = np.array([o.regret[1.0] for o in ours])
    b = np.array([o.regret[1.0] for o in peer])
    means_a = a[rng.integers(0, len(a), size=(resamples, len(a)))].mean(axis=1)
    means_b = b[rng.integers(0, len(b), size=(resamples, len(b)))].mean(axis=1)
    # No interpolation between quantiles: an inf ratio stays inf.
    low, high = np.quantile(regret_ratio(means_a, means_b), [0.025, 0.975], method="inverted_cdf")
    return float(low), float(high)


def geomean_of(ratios: list[float]) -> float:
    """The geometric mean of the finite, positive ratios (nan if there is none)."""
    finite = [r for r in ratios if 0 < r < math.inf]
    return math.exp(statistics.fmean(math.log(r) for r in finite)) if finite else math.nan


def worst_ratio(problems, names, outcomes) -> float | None:
    """max over problems of mean final regret of hpo bohb / that of the best peer."""
    ratios = []
    for problem in problems:
        if (problem.name, "hpo bohb") not in outcomes:
            continue
        ours = mean_final(outcomes[problem.name, "hpo bohb"])
        peers = {p: mean_final(outcomes[problem.name, p]) for p in PEERS if (problem.name, p) in outcomes}
        if not peers:
            continue
        which = min(peers, key=peers.get)
        best_peer = peers[which]
        ratio = float(regret_ratio(ours, best_peer))
        ratios.append(ratio)
        low, high = ratio_interval(outcomes[problem.name, "hpo bohb"], outcomes[problem.name, which])
        print(f"{problem.name}: hpo bohb {ours:.4g} vs best peer {best_peer:.4g} ({which}) -> ratio {ratio:.3f} "
              f"(95% interval {low:.2f}-{high:.2f})")
    return max(ratios) if ratios else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="20 full-budget evaluations of budget per run instead of 40")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (more seeds in the same cache)")
    parser.add_argument("--full-evals", type=float, default=None,
                        help="total budget in full-budget evaluations (default 40, quick 20)")
    parser.add_argument("--only", nargs="*", help="run only these searchers")
    parser.add_argument("--problems", nargs="*", help="run only these problems")
    parser.add_argument("--set", choices=("all", "tuning", "heldout", "heldout2", "twins"), default="all",
                        help="the problems the defaults may be tuned on, the first or the second held-out set, "
                             "all of them, or the noisy problems' noise-free twins (not part of 'all')")
    parser.add_argument("--cache", default=None,
                        help="a folder keeping the peers' outcomes between runs (they are the slow part)")
    parser.add_argument("--only-cached", action="store_true",
                        help="leave a peer out of a problem unless the cache holds all its seeds there")
    parser.add_argument("--no-latency", action="store_true", help="skip the ask() latency measurement")
    parser.add_argument("--png", default="benchmarks/searchers_regret.png")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    full_evals = args.full_evals or (20 if args.quick else 40)
    total = full_evals * MAX_BUDGET
    names = args.only or list(SEARCHERS)
    chosen = {"all": ALL_PROBLEMS, "tuning": TUNING, "heldout": HELD_OUT_PROBLEMS,
              "heldout2": HELD_OUT_2_PROBLEMS, "twins": NOISE_FREE_TWINS}[args.set]
    problems = [chosen[n] for n in (args.problems or chosen)]
    cache = PeerCache(args.cache, args.only_cached)
    print(f"total budget {total:g} per run ({full_evals:g} full-budget evaluations), {args.seeds} seeds, "
          f"budgets {MIN_BUDGET:g}..{MAX_BUDGET:g}, eta {ETA}")

    outcomes: dict[tuple[str, str], list[Outcome]] = {}
    for problem in problems:
        for name in names:
            started = time.perf_counter()
            runs = [cache.get(name, problem, seed, total)
                    for seed in range(args.first_seed, args.first_seed + args.seeds)]
            if any(run is None for run in runs):
                print(f"  {problem.name:20s} {name:22s} left out: {sum(r is not None for r in runs)} of "
                      f"{args.seeds} seeds in the cache", flush=True)
                continue
            outcomes[problem.name, name] = runs
            print(f"  {problem.name:20s} {name:22s} {time.perf_counter() - started:6.1f}s", flush=True)

    print("\nMean ± std regret of the incumbent at 25%, 50% and 100% of the budget; overhead per evaluation "
          "(median over runs, ms). Problems marked (held out) were never used to choose a default.\n")
    for problem in problems:
        mark = held_out_mark(problem.name)
        print(f"**{problem.name}**{mark}\n")
        print("| searcher | 25% | 50% | 100% | overhead ms/eval |")
        print("| --- | --- | --- | --- | --- |")
        for name in names:
            if (problem.name, name) not in outcomes:
                print(f"| {name} | n/a | n/a | n/a | n/a |")
                continue
            runs = outcomes[problem.name, name]
            cells = []
            for fraction in FRACTIONS:
                values = [o.regret[fraction] for o in runs]
                cells.append(f"{np.mean(values):.4g} ± {np.std(values):.2g}")
            overhead = statistics.median(o.overhead_ms for o in runs)
            print(f"| {name} | " + " | ".join(cells) + f" | {overhead:.3f} |")
        print()

    if not args.no_latency:
        for cls in (functools.partial(BOHB, **BOHB_OPTIONS), FreezeThaw, Hyperband, RandomSearch):
            every, fresh = ask_latency_ms(cls)
            print(f"{getattr(cls, 'func', cls).__name__} ask() median with 1,000 finished trials: {every:.3f} ms "
                  f"(new configs only: {fresh:.3f} ms)")
    if args.png:
        _plot(outcomes, names, problems, total, args.png)

    print("Each of ours against the best peer measured: geometric mean over problems of the ratio of mean "
          "final regrets (the worst three):")
    for name in (n for n in names if n.startswith("hpo ")):
        found = []
        for problem in problems:
            peers = [mean_final(outcomes[problem.name, p]) for p in PEERS if (problem.name, p) in outcomes]
            if (problem.name, name) in outcomes and peers:
                found.append((float(regret_ratio(mean_final(outcomes[problem.name, name]), min(peers))), problem.name))
        if found:
            worst = ", ".join(f"{p} {r:.2f}" for r, p in sorted(found, reverse=True)[:3])
            print(f"  {name}: {geomean_of([r for r, _ in found]):.3f} ({worst})")
    print("\nEvery problem:")
    overall = worst_ratio(problems, names, outcomes)
    print("\nThe first held-out set (looked at since):")
    first = worst_ratio([p for p in problems if p.name in HELD_OUT_PROBLEMS], names, outcomes)
    print("\nThe second held-out set:")
    heldout = worst_ratio([p for p in problems if p.name in HELD_OUT_2_PROBLEMS], names, outcomes)
    if overall is not None:
        def shown(ratio):
            return "n/a" if ratio is None else f"{ratio:.3f}"
        # worst_ratio_heldout is the set no default was chosen on; the first set stays as a second figure.
        print(f"worst_ratio_bohb_vs_best_peer={overall:.3f} worst_ratio_heldout_first={shown(first)} "
              f"worst_ratio_heldout={shown(heldout)}")


def _plot(outcomes, names, problems, total, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(4, len(problems))
    rows = int(math.ceil(len(problems) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False)
    for ax, problem in zip(axes.flat, problems):
        for name in names:
            if (problem.name, name) not in outcomes:
                continue
            runs = outcomes[problem.name, name]
            mean = [np.mean([o.regret[f] for o in runs]) for f in GRID]
            ax.plot(np.array(GRID) * total, np.maximum(mean, 1e-9), label=name,
                    linestyle="-" if name.startswith("hpo") else "--")
        ax.set_yscale("log")
        ax.set_title(problem.name + held_out_mark(problem.name))
        ax.set_xlabel("budget spent (sum of epochs)")
        ax.set_ylabel("mean regret of incumbent")
    for ax in list(axes.flat)[len(problems):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
