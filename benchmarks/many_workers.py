"""Searchers on 1 to 256 workers, in simulated time: hpo's own driver on the simulated executor.

    nice -n 19 .venv-bench/bin/python benchmarks/many_workers.py --quick          # 2 problems, 1 seed
    nice -n 19 .venv-bench/bin/python benchmarks/many_workers.py --seeds 3 --cache /tmp/many-workers

Every run of ours is `hpo`'s real driver (`hpo.driver.runner.Runner`, the searcher, a study on disk)
over `hpo.executors.simulated.SimulatedExecutor`: each trial holds a simulated worker for the
seconds its problem says it costs, and nothing sleeps. Promotions resume from their parent's
checkpoint (`Simulation(resumes=True)`): a job from epoch a to b costs time(b) - time(a).

Problems (`benchmarks/published_problems.py`):
- the LCBench tuning tasks through YAHPO Gym's surrogate: the loss is 1 - val_balanced_accuracy
  at epoch round(budget), budgets 52/27..52, and the cost of training a config to epoch e is
  the surrogate's `time` output at e (seconds, cumulative), made to rise (`rising_time`: for
  some configs the regression falls over the later epochs; such an epoch costs the config's
  median rising one). LCBench runs carry `costs` in their cache key;
- MFHartmann (mf-prior-bench's mfh3_moderate, mfh6_moderate unless --mfh says otherwise),
  fidelity z over 100/27..100, with this cost model: training a config to fidelity z takes
  z * 2**u seconds, u uniform in [-2, 2] drawn from a hash of the config. Per-unit costs
  then differ 16-fold between configs, as model sizes do, and independently of the loss.

Time budget. T1, the 1-worker run's simulated time, is `--full-evals` (default 30) times the
mean cost of a full-budget evaluation over 200 uniform configs. A run on W workers gets
T1 * min(1, K / W) (K = `--window`, default 6), and stops as soon as its incumbent is as good
as the 1-worker run's final one with the same seed (so a searcher that never gets there runs
its whole window, and a speedup below W / K is not measured).

Regret: the incumbent is the best value observed at the highest budget any trial finished
at (as `benchmarks/searchers.Trace`), and its regret is its exact value at the full budget
(LCBench's surrogate is deterministic, MFHartmann's noise is 0 at z = 100) less a reference:
MFHartmann's known optimum, LCBench's lowest value any run here reached.

Reported per worker count and searcher:
- speedup: the simulated time the 1-worker run took to reach its final regret, over the time
  the W-worker run took to reach that regret (same seed); geometric mean over problems and
  seeds. A run that never reached it counts at its window's end, so its speedup is an upper
  bound, and the table says how many did not (`n>`); the median beside it, since a run whose
  first wave of random configs happens to hold a good one reaches its target at once and
  weighs on the geometric mean (thousands of times sooner);
- utilisation: busy worker-seconds over W times the run's simulated time, up to its stop
  (median over runs);
- decision: the driver's real time from a finished trial to the next submit, median over
  every decision of every run, in ms (the machine is shared: read it as an order of size);
- driver load: the driver's real decision time summed over a run, over the run's simulated
  seconds (median over runs): the share of its time the driver would spend deciding if the
  trials took their simulated time for real. Above about 0.05, workers would wait on it;
  simulated time leaves that out, so utilisation alone cannot show it;
- regret at a quarter of the window and at its end (mean over problems and seeds; a run with no
  incumbent yet counts as infinite): with `--no-stop` the W-worker runs go on past their
  target to the window's end (cached apart), so this compares searchers at the same simulated
  times; without it, a run that stopped at its target holds its regret there;
- regret against simulated time, as a PNG (`--plot`): per worker count, each searcher's
  geometric mean over problems and seeds of the regret divided by random search's final
  regret on 1 worker, against simulated time over T1.

- speedup to a common target: the same, with one target for every searcher (the worst of
  their 1-worker final regrets on that problem and seed, which every run that reached its own
  target has passed) and one baseline (random search on 1 worker): how many times sooner than
  random search on one worker the searcher on W workers gets there. This one rewards a good
  searcher; the first rewards a searcher whose 1-worker run ends badly, as its target is easy.
  The worst 1-worker result moves with the searchers a report lists; `--common random` takes
  random search's 1-worker final regret instead, the same target whatever else is listed.

`--options '{"async_bohb": {...}}'` runs a searcher of ours with those `search.options`
(cached apart from its default runs).

Peers, in one event simulation (`run_event_loop`: their own ask and tell, one job per free
worker, the running jobs pending, each told when it finishes; nothing resumes, so a job at
budget b is charged b's full cost from scratch):
- Optuna's TPE with the constant liar (full budget only);
- DEHB (0.1.2), with its own brackets over the same budgets (eta 3): a promotion trains the
  promoted config again from scratch, as DEHB evaluates, and is charged so;
- random search (ours, at the full budget).
Syne Tune's schedulers run in Syne Tune's own simulator, in `benchmarks/many_workers_syne.py`
(a venv of their own), which writes its runs into the same cache; `--cached "syne asha syne
hyperband syne bohb"` reads them into this report:

    nice -n 19 .venv-bench-syne/bin/python benchmarks/many_workers_syne.py --seeds 1 --cache /tmp/many-workers
    nice -n 19 .venv-bench/bin/python benchmarks/many_workers.py --seeds 1 --cache /tmp/many-workers \
        --cached "syne asha syne hyperband syne bohb" --plot many_workers_regret.png
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import heapq
import json
import logging
import math
import statistics
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.published_problems import (  # noqa: E402
    DEFAULT_YAHPO_DATA,
    LCBENCH_SPACE,
    LCBENCH_TUNING,
    _yahpo,
    fidelity_of,
    mfhartmann,
    sample_configs,
)

WORKERS = (1, 4, 16, 64, 256)
OURS = ("random", "hyperband", "asha", "async_hyperband", "bohb", "async_bohb", "freeze_thaw")
PEERS = ("optuna tpe+liar", "dehb")
REFERENCE = "random"               # embarrassingly parallel: what parallelism alone gives
ETA = 3


# --- problems ----------------------------------------------------------------------------------

@dataclass
class SimProblem:
    """A problem with a cost: `evaluate(config, budget, seed) -> (value, seconds from scratch)`."""

    name: str
    space: dict[str, Any]
    min_budget: float
    max_budget: float
    evaluate: Callable[[Mapping[str, Any], float, int], tuple[float, float]]
    exact: Callable[[Mapping[str, Any]], float]
    optimum: float | None                 # None: regret from the lowest value any run reached
    t1: float = 0.0                       # the 1-worker time budget (set by `time_budget`)
    # The learning curve for simulators that replay one (Syne Tune's): (value, seconds from
    # scratch) at every integer fidelity 1..fidelities, as `evaluate` gives them one at a time.
    fidelities: int = 0
    curve: Callable[[Mapping[str, Any], int], list[tuple[float, float]]] | None = None
    # Part of every cached run's key when set: runs made under another cost model are not read.
    costs: str = ""


def rising_time(cumulative: np.ndarray) -> np.ndarray:
    """Seconds from scratch that never fall. The LCBench surrogate's cumulative `time` is a
    regression that nothing makes rise, and for some configs it falls over the later epochs,
    which would make a promotion there free (notes/many_workers.md, "An LCBench epoch that
    cost nothing"). An epoch where it does not rise costs the config's median rising epoch."""
    steps = np.diff(cumulative, prepend=0.0)
    rising = steps[steps > 0]
    typical = float(np.median(rising)) if rising.size else 0.0
    return np.cumsum(np.where(steps > 0, steps, typical))


def lcbench_problem(task: str, data_path: str = DEFAULT_YAHPO_DATA) -> SimProblem:
    memo: dict[tuple, list[tuple[float, float]]] = {}

    def curve(config, seed=0):
        # One surrogate call for the 52 epochs, not 52: an epoch's cost needs the whole curve.
        key = tuple(sorted(config.items()))
        if key not in memo:
            bench = _yahpo(data_path)
            bench.set_instance(task)        # the surrogate reads the task from the instance
            results = bench.objective_function([dict(config, epoch=e) for e in range(1, 53)])
            seconds = rising_time(np.array([float(r["time"]) for r in results]))
            memo[key] = [(1.0 - float(r["val_balanced_accuracy"]), float(t)) for r, t in zip(results, seconds)]
        return memo[key]

    def evaluate(config, budget, seed=0):
        return curve(config)[fidelity_of(budget) - 1]

    return SimProblem(f"lcbench_{task}", dict(LCBENCH_SPACE), 52 / 27, 52.0, evaluate,
                      lambda config: curve(config)[51][0], None, fidelities=52, curve=curve,
                      costs="time rises")


def mfh_problem(variant: str) -> SimProblem:
    published = mfhartmann(variant)
    problem = published.problem

    def unit_cost(config: Mapping[str, Any]) -> float:
        key = json.dumps({k: round(float(v), 12) for k, v in sorted(config.items())})
        u = (zlib.crc32(key.encode()) / 0xFFFFFFFF) * 4.0 - 2.0
        return 2.0 ** u

    def evaluate(config, budget, seed=0):
        z = min(100, fidelity_of(budget))
        return problem.evaluate(config, budget, seed), z * unit_cost(config)

    return SimProblem(variant, dict(problem.space), published.min_budget, published.max_budget, evaluate,
                      problem.exact, problem.optimum, fidelities=100,
                      curve=lambda config, seed=0: [evaluate(config, z, seed) for z in range(1, 101)])


def time_budget(problem: SimProblem, full_evals: float) -> float:
    configs = sample_configs(problem.space, 200, seed=12345)
    return full_evals * float(np.mean([problem.evaluate(c, problem.max_budget, 0)[1] for c in configs]))


# --- one run -----------------------------------------------------------------------------------

@dataclass
class Run:
    trace: list[tuple[float, float]]      # (simulated time, incumbent's exact value), at each change
    end: float                            # simulated seconds the run lasted
    window: float                         # the simulated seconds it was allowed
    utilisation: float
    decisions: list[float]                # real seconds, one per finished trial
    trials: int
    wall: float = 0.0
    reached: float | None = None          # when it reached its target, where it had one
    extra: dict[str, Any] = field(default_factory=dict)


class _Reached(Exception):
    """The run's incumbent is as good as its target: no need to simulate on."""


class Incumbent:
    """`benchmarks/searchers.Trace`'s rule: the best value at the highest budget finished."""

    def __init__(self, exact: Callable[[Mapping[str, Any]], float]):
        self.exact = exact
        self.held: tuple[float, float] | None = None      # (budget, observed)
        self.trace: list[tuple[float, float]] = []

    def finished(self, when: float, config: Mapping[str, Any], budget: float, value: float) -> None:
        held = self.held
        if held is None or budget > held[0] + 1e-9 or (abs(budget - held[0]) < 1e-9 and value < held[1]):
            self.held = (budget, value)
            exact = self.exact(config)
            if not self.trace or exact != self.trace[-1][1]:
                self.trace.append((when, exact))

    @property
    def value(self) -> float:
        return self.trace[-1][1] if self.trace else math.inf


def run_ours(problem: SimProblem, algorithm: str, workers: int, seed: int, window: float,
             target: float | None, options: Mapping[str, Any] | None = None, keep_study: Path | None = None) -> Run:
    """hpo's driver over the simulated executor, stopped at `window` simulated seconds or
    once the incumbent reaches `target`; `options`: the searcher's `search.options`. The
    study is made in a temporary folder, or at `keep_study`, which must not exist, and stays."""
    from hpo.config import experiment_from_dict
    from hpo.driver.runner import Runner, searcher_for
    from hpo.objective.simulation import Simulation, simulated_executor
    from hpo.study.resume import prepare_study

    def objective(config, budget):
        value, seconds = problem.evaluate(config, budget, seed)
        return {"objective": value, "cost": seconds}

    raw = {"name": "many-workers", "seed": seed, "space": problem.space,
           "search": {"algorithm": algorithm, "objective": "objective", "direction": "minimize",
                      "min_budget": problem.min_budget, "max_budget": problem.max_budget, "eta": ETA,
                      "max_trials": None, "time_limit": window, "options": dict(options or {})},
           "execution": {"backend": "inline", "workers": workers}}
    experiment = experiment_from_dict(raw, source="benchmarks/many_workers.py", needs_data=False)
    incumbent = Incumbent(problem.exact)
    started = time.perf_counter()
    with (contextlib.nullcontext(str(keep_study.parent)) if keep_study
          else tempfile.TemporaryDirectory(prefix="hpo-many-workers-")) as folder:
        study = prepare_study(experiment, keep_study or Path(folder) / "study")
        executor = simulated_executor(Simulation(cost="cost", resumes=True), objective, "objective", workers, study)
        seen: dict[str, Any] = {"ids": set(), "since": -math.inf}
        watching: list[float] = []          # real seconds in on_progress: not the driver's own

        def on_progress(progress) -> None:
            began = time.perf_counter()
            for row in _finished_since(study, seen):
                incumbent.finished(row.finished_at, row.config, row.budget, row.value)
            watching.append(time.perf_counter() - began)
            if target is not None and incumbent.value <= target + 1e-12:
                raise _Reached()

        runner = Runner(experiment, study, searcher_for(experiment), executor, on_progress=on_progress,
                        clock=executor.clock)
        reached = None
        try:
            runner.run()
        except _Reached:
            reached = executor.clock()
        finally:
            study.close()
        report = executor.report()
    # One decision per finished trial, each holding one on_progress call: take that out.
    decisions = [max(0.0, d - w) for d, w in zip(report.decision_seconds, watching)]
    return Run(trace=incumbent.trace, end=report.simulated_seconds, window=window, utilisation=report.utilisation,
               decisions=decisions, trials=report.trials, wall=time.perf_counter() - started,
               reached=reached)


def _finished_since(study, seen: dict[str, Any]):
    """Complete trials not read yet, by finish time. The benchmark reads the study's table
    itself: `Study.trials()` decodes every row, which over thousands of trials would be
    quadratic."""
    rows = study._db.execute(
        "SELECT trial_id, config, budget, value, finished_at FROM trials WHERE state='complete' "
        "AND value IS NOT NULL AND finished_at >= ? ORDER BY finished_at, trial_id", (seen["since"],)).fetchall()
    fresh = [r for r in rows if r[0] not in seen["ids"]]
    for r in fresh:
        seen["ids"].add(r[0])
        seen["since"] = max(seen["since"], r[4])
    return [_Row(json.loads(r[1]), r[2], r[3], r[4]) for r in fresh]


@dataclass
class _Row:
    config: dict[str, Any]
    budget: float
    value: float
    finished_at: float


def run_event_loop(problem: SimProblem, workers: int, seed: int, window: float, target: float | None,
                   ask: Callable[[], tuple[Any, dict[str, Any], float]],
                   tell: Callable[[Any, float, float], None]) -> Run:
    """A peer's own ask and tell on `workers` simulated workers: each free worker asks, and holds
    the job for the seconds its problem charges; a job is told when it finishes, and its worker
    asks again. `ask() -> (handle, config, budget)`; `tell(handle, value, seconds)`. A job costs
    its budget's full cost from scratch (no peer driven here resumes a checkpoint). Stops at
    `window` simulated seconds or once the incumbent reaches `target`."""
    incumbent = Incumbent(problem.exact)
    started = time.perf_counter()
    now, busy, submitted = 0.0, 0.0, 0
    running: list[tuple[float, int, Any, dict, float, float, float]] = []
    decisions: list[float] = []
    decided_from: float | None = None
    reached = None
    while True:
        while len(running) < workers:
            handle, config, budget = ask()
            if decided_from is not None:
                decisions.append(time.perf_counter() - decided_from)
                decided_from = None
            value, seconds = problem.evaluate(config, budget, seed)
            heapq.heappush(running, (now + seconds, submitted, handle, config, budget, value, seconds))
            submitted += 1
            busy += seconds
        finishes, _, handle, config, budget, value, seconds = running[0]
        if finishes > window:
            now = window
            break
        heapq.heappop(running)
        now = finishes
        decided_from = time.perf_counter()
        tell(handle, value, seconds)
        incumbent.finished(now, config, budget, value)
        if target is not None and incumbent.value <= target + 1e-12:
            reached = now
            break
    busy -= sum(job[0] - now for job in running)
    return Run(trace=incumbent.trace, end=now, window=window, utilisation=busy / (workers * now) if now else 1.0,
               decisions=decisions, trials=submitted, wall=time.perf_counter() - started, reached=reached)


def run_optuna_liar(problem: SimProblem, workers: int, seed: int, window: float, target: float | None) -> Run:
    """Optuna's TPE with the constant liar: each free worker asks (the running trials are
    pending, and the liar fills them in), and a trial is told when it finishes. Full budget."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = {}
    for name, spec in problem.space.items():
        if spec["type"] == "float":
            distributions[name] = optuna.distributions.FloatDistribution(spec["low"], spec["high"],
                                                                         log=spec.get("log", False))
        else:
            distributions[name] = optuna.distributions.IntDistribution(spec["low"], spec["high"],
                                                                       log=spec.get("log", False))
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed, constant_liar=True))

    def ask():
        trial = study.ask(distributions)
        return trial, dict(trial.params), problem.max_budget

    return run_event_loop(problem, workers, seed, window, target, ask,
                          lambda trial, value, seconds: study.tell(trial, value))


def run_dehb(problem: SimProblem, workers: int, seed: int, window: float, target: float | None) -> Run:
    """DEHB (0.1.2) through its ask and tell, with its own brackets (eta 3 over the problem's
    budgets): each free worker asks, so up to `workers` jobs are pending, which DEHB's bracket
    manager allows (a bracket waiting on its rung, DEHB opens the next one). DEHB does not
    resume: a job at fidelity b trains from scratch and is charged the full cost of b. DEHB is
    built with one worker of its own (more would start a Dask cluster); the brackets done are
    dropped after every tell, as its own run loop does."""
    from dehb import DEHB

    from benchmarks.searchers import _configspace, typed
    logging.getLogger("dehb").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="hpo-many-workers-dehb-") as folder:
        optimizer = DEHB(cs=_configspace(problem, seed), dimensions=len(problem.space),
                         min_fidelity=problem.min_budget, max_fidelity=problem.max_budget, eta=ETA, n_workers=1,
                         output_path=folder, seed=seed, save_freq=None, log_level="ERROR")

        def ask():
            job = optimizer.ask()
            return job, typed(problem, dict(job["config"])), float(job["fidelity"])

        def tell(job, value, seconds):
            optimizer.tell(job, {"fitness": value, "cost": seconds})
            optimizer._clean_inactive_brackets()

        return run_event_loop(problem, workers, seed, window, target, ask, tell)


PEER_RUNS: dict[str, Callable[..., Run]] = {"optuna tpe+liar": run_optuna_liar, "dehb": run_dehb}


def run_one(problem: SimProblem, searcher: str, workers: int, seed: int, window: float,
            target: float | None, options: Mapping[str, Any] | None = None) -> Run:
    if searcher in PEER_RUNS:
        return PEER_RUNS[searcher](problem, workers, seed, window, target)
    return run_ours(problem, searcher, workers, seed, window, target, options)


# --- the cache ---------------------------------------------------------------------------------

def source_hash() -> str:
    """Ours rerun when the driver, the searchers, the study or the executor change."""
    root = Path(__file__).resolve().parents[1] / "hpo"
    digest = hashlib.sha256()
    for folder in ("search", "study", "executors"):
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(path.read_bytes())
    for name in ("driver/runner.py", "clock.py", "objective/simulation.py"):
        digest.update((root / name).read_bytes())
    return digest.hexdigest()[:12]


class Cache:
    def __init__(self, folder: str | None, tag: str):
        self.folder = Path(folder) if folder else None
        self.tag = tag
        if self.folder:
            self.folder.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / (hashlib.sha256(key.encode()).hexdigest()[:20] + ".json")

    def get(self, key: str) -> Run | None:
        path = self._file(key)
        if path is None or not path.exists():
            return None
        data = json.loads(path.read_text())
        data["trace"] = [tuple(p) for p in data["trace"]]
        return Run(**data)

    def put(self, key: str, run: Run) -> None:
        path = self._file(key)
        if path is not None:
            path.write_text(json.dumps(asdict(run)))


# --- the report --------------------------------------------------------------------------------

def time_to(trace: list[tuple[float, float]], level: float) -> float:
    for when, value in trace:
        if value <= level + 1e-12:
            return when
    return math.inf


def regret_at(trace: list[tuple[float, float]], when: float, reference: float) -> float:
    value = math.inf
    for t, v in trace:
        if t > when:
            break
        value = v
    return value - reference


def speedup(one: Run, many: Run, level: float) -> tuple[float, bool]:
    """How many times sooner `many` reached `level` than `one` did, and whether `many` never
    reached it (it then counts at its end, so the figure is an upper bound)."""
    reached = time_to(many.trace, level)
    missed = not math.isfinite(reached)
    return time_to(one.trace, level) / max(many.end if missed else reached, 1e-12), missed


def missed_runs(problems: list[SimProblem], searcher: str, workers: int, seeds: list[int],
                runs: Mapping[tuple, Run]) -> list[str]:
    """Each `workers`-worker run that never reached its 1-worker run's final value: where it
    ended against that target, and by how much (a near miss reads a few per cent)."""
    lines = []
    for problem in problems:
        for seed in seeds:
            one, many = runs[(problem.name, searcher, 1, seed)], runs[(problem.name, searcher, workers, seed)]
            if not one.trace or math.isfinite(time_to(many.trace, one.trace[-1][1])):
                continue
            target = one.trace[-1][1]
            end = many.trace[-1][1] if many.trace else math.nan
            lines.append(f"{problem.name} seed {seed}: ended at {end:.4f} against {target:.4f} "
                         f"({(end - target) / max(abs(target), 1e-12):+.1%})")
    return lines


def lowest_values(problems: list[SimProblem], *run_sets: Mapping[tuple, Run]) -> dict[str, float]:
    """Each problem's regret reference: its known optimum, else the lowest value any run of
    `run_sets` (keyed by (problem name, ...)) reached."""
    return {p.name: p.optimum if p.optimum is not None else
            min(v for runs in run_sets for (name, *_), run in runs.items() if name == p.name for _, v in run.trace)
            for p in problems}


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def seed_interval(by_seed: Mapping[int, list[float]], share: float = 0.9, draws: int = 4000) -> tuple[float, float]:
    """The central `share` interval of the geometric mean when the seeds are resampled with
    replacement, each seed's runs (one per problem) drawn together: how much the figure owes
    to the set of seeds. Seeded, so a report reads the same every time."""
    logs = [[math.log(v) for v in values if v > 0 and math.isfinite(v)] for values in by_seed.values()]
    logs = [values for values in logs if values]
    if not logs:
        return math.nan, math.nan
    sums, counts = np.array([sum(v) for v in logs]), np.array([len(v) for v in logs])
    picks = np.random.default_rng(0).integers(0, len(logs), size=(draws, len(logs)))
    means = np.exp(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))
    low, high = np.quantile(means, [(1 - share) / 2, (1 + share) / 2])
    return float(low), float(high)


def arguments(description: str, searchers: str) -> argparse.ArgumentParser:
    """The options `many_workers.py` and `many_workers_syne.py` share: the same problems, time
    windows, seeds and cache keys, so that one report reads both scripts' runs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="2 problems, 1 seed, a short budget")
    parser.add_argument("--tasks", default=" ".join(LCBENCH_TUNING), help="LCBench tasks")
    parser.add_argument("--mfh", default="mfh3_moderate mfh6_moderate", help="MFHartmann variants")
    parser.add_argument("--seeds", default="3", help="a count (3: seeds 0-2) or a list ('1 2', '1,2', '2,')")
    parser.add_argument("--workers", default=" ".join(map(str, WORKERS)))
    parser.add_argument("--searchers", default=searchers)
    parser.add_argument("--full-evals", type=float, default=30.0, help="T1 in full-budget evaluations")
    parser.add_argument("--window", type=float, default=6.0, help="K: a W-worker run gets T1 * min(1, K/W)")
    parser.add_argument("--cache", default=None, help="a folder keeping every run, to extend a report")
    parser.add_argument("--tag", default=None,
                        help="the cache tag of hpo's runs (default: a hash of hpo's driver and searchers)")
    parser.add_argument("--options", default="{}",
                        help="JSON: per searcher of ours, its search.options, e.g. "
                             "'{\"async_bohb\": {\"top_n_percent\": 10}}' (part of the cache key)")
    parser.add_argument("--common", choices=("worst", "random"), default="worst",
                        help="the common target: the worst of the listed searchers' 1-worker final regrets, or "
                             "random search's (the same whatever else is listed)")
    parser.add_argument("--no-stop", action="store_true",
                        help="W-worker runs go on to their window's end past their target (their own cache "
                             "entries), so that the report's regret at fixed times compares searchers")
    parser.add_argument("--plot", default=None, help="write regret against simulated time to this PNG")
    parser.add_argument("--json", default=None, help="write the table's figures to this file")
    return parser


def setting(args) -> tuple[list[SimProblem], list[str], list[int], list[int]]:
    """The problems (each with its T1), searchers, worker counts and seeds the options name."""
    if args.quick:
        args.tasks, args.mfh, args.seeds, args.full_evals = "126025", "mfh3_moderate", "1", 20.0
    problems = [lcbench_problem(t) for t in args.tasks.split()] + [mfh_problem(v) for v in args.mfh.split()]
    for problem in problems:
        problem.t1 = time_budget(problem, args.full_evals)
    listed = "," in args.seeds or len(args.seeds.split()) > 1
    seeds = [int(s) for s in args.seeds.replace(",", " ").split()] if listed else list(range(int(args.seeds)))
    searchers = _names(args.searchers)
    return problems, searchers, [int(w) for w in args.workers.split()], seeds


def collect(problems: list[SimProblem], searchers: list[str], workers: list[int], seeds: list[int], args,
            run: Callable[..., Run] | None) -> dict[tuple[str, str, int, int], Run]:
    """Every (problem, searcher, workers, seed) run, from the cache or run now by `run(problem,
    searcher, workers, seed, window, target)` (None: only the cache). A searcher's 1-worker run
    comes first: its final regret is the target its W-worker runs stop at."""
    cache = Cache(args.cache, args.tag or source_hash())
    options = json.loads(args.options or "{}")
    runs: dict[tuple[str, str, int, int], Run] = {}
    for problem in problems:
        for searcher in searchers:
            for seed in seeds:
                target = None
                for w in sorted(set(workers) | {1}):
                    window = problem.t1 * min(1.0, args.window / w)
                    stop_at = target if w > 1 and not args.no_stop else None
                    tag = cache.tag if searcher in OURS else "peer"
                    if options.get(searcher):     # a searcher run with options is keyed apart
                        tag += " " + json.dumps(options[searcher], sort_keys=True)
                    key = json.dumps([tag, problem.name, searcher, w, seed, f"{window:.9g}",
                                      None if stop_at is None else f"{stop_at:.9g}"]
                                     + ([problem.costs] if problem.costs else []))
                    found = cache.get(key)
                    if found is None and run is None:
                        raise SystemExit(f"{searcher} on {problem.name}, {w} workers, seed {seed}: not in the "
                                         f"cache {args.cache} (tag {cache.tag}); run it with its own script first")
                    if found is None:
                        found = run(problem, searcher, w, seed, window, stop_at,
                                    **({"options": options[searcher]} if options.get(searcher) else {}))
                        cache.put(key, found)
                    runs[(problem.name, searcher, w, seed)] = found
                    if w == 1:
                        target = found.trace[-1][1] if found.trace else None
                    print(f"# {problem.name} {searcher} W={w} seed={seed}: trials={found.trials} "
                          f"util={found.utilisation:.3f} wall={found.wall:.1f}s "
                          f"reached={'-' if found.reached is None else f'{found.reached / problem.t1:.4f}T1'}",
                          flush=True)
    return runs


def main() -> None:
    parser = arguments(__doc__.split("\n")[0], " ".join(OURS + PEERS))
    parser.add_argument("--cached", default="", help="searchers to read from the cache only (run elsewhere: "
                                                     "Syne Tune's schedulers by many_workers_syne.py)")
    parser.add_argument("--misses", action="store_true",
                        help="list each W-worker run that never reached its 1-worker run's final value: where it "
                             "ended, against that target")
    args = parser.parse_args()
    logging.getLogger("hpo").setLevel(logging.ERROR)
    problems, searchers, workers, seeds = setting(args)
    cached = _names(args.cached)
    runs = collect(problems, searchers, workers, seeds, args, run_one)
    runs.update(collect(problems, cached, workers, seeds, args, None))
    report(problems, searchers + cached, workers, seeds, runs, args)


def _names(text: str) -> list[str]:
    """Searcher names, where a peer's name has spaces ('optuna tpe+liar', 'syne asha'); names
    with more in them are separated by '|' ('syne asha (poll 5)|syne bohb (poll 5)')."""
    if "|" in text:
        return [name.strip() for name in text.split("|") if name.strip()]
    out, words = [], text.split()
    i = 0
    while i < len(words):
        if words[i] in ("optuna", "syne") and i + 1 < len(words):
            out.append(f"{words[i]} {words[i + 1]}")
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out


def report(problems, searchers, workers, seeds, runs, args) -> None:
    references = lowest_values(problems, runs)
    table: dict[str, dict[str, Any]] = {}
    chosen = [REFERENCE] if args.common == "random" and REFERENCE in searchers else searchers
    commons = {(problem.name, seed): max(runs[(problem.name, s, 1, seed)].trace[-1][1] for s in chosen
                                         if runs[(problem.name, s, 1, seed)].trace)
               for problem in problems for seed in seeds}
    print(f"\nT1 = {args.full_evals:g} full-budget evaluations; window K = {args.window:g}; seeds {seeds}; "
          f"problems: {', '.join(p.name for p in problems)}")
    for w in workers:
        print(f"\n## {w} worker{'s' if w > 1 else ''}")
        print("| searcher | speedup: geomean (median) | 90% over seeds | not reached | speedup to the common target | "
              "utilisation (median) | decision ms (median) | driver load (median) | final regret (mean) | "
              "regret at a quarter of the window, at its end (mean) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for searcher in searchers:
            by_seed: dict[int, list[float]] = {}
            speedups, censored, utils, decisions, loads, finals, common = [], 0, [], [], [], [], []
            at_times: tuple[list[float], list[float]] = ([], [])
            for problem in problems:
                for seed in seeds:
                    one, many = runs[(problem.name, searcher, 1, seed)], runs[(problem.name, searcher, w, seed)]
                    if not one.trace:
                        continue
                    value, missed = speedup(one, many, one.trace[-1][1])
                    speedups.append(value)
                    by_seed.setdefault(seed, []).append(value)
                    censored += missed
                    base = runs.get((problem.name, REFERENCE, 1, seed))
                    if base is not None and base.trace:
                        common.append(speedup(base, many, commons[(problem.name, seed)])[0])
                    utils.append(many.utilisation)
                    decisions.extend(many.decisions)
                    loads.append(sum(many.decisions) / many.end if many.end > 0 else math.nan)
                    finals.append(regret_at(many.trace, many.end, references[problem.name]))
                    for share, values in zip((0.25, 1.0), at_times):
                        values.append(regret_at(many.trace, share * many.window, references[problem.name]))
            low, high = seed_interval(by_seed)
            row = {"speedup": geomean(speedups), "speedup_90": [low, high], "not_reached": censored,
                   "runs": len(speedups),
                   "speedup_median": statistics.median(speedups) if speedups else math.nan,
                   "utilisation": statistics.median(utils) if utils else math.nan,
                   "common_speedup": geomean(common),
                   "decision_ms": 1000 * statistics.median(decisions) if decisions else math.nan,
                   "driver_load": statistics.median(loads) if loads else math.nan,
                   "final_regret": statistics.mean(finals) if finals else math.nan,
                   "regret_quarter": statistics.mean(at_times[0]) if at_times[0] else math.nan,
                   "regret_window": statistics.mean(at_times[1]) if at_times[1] else math.nan}
            table.setdefault(str(w), {})[searcher] = row
            print(f"| {searcher} | {row['speedup']:.1f}x ({row['speedup_median']:.1f}x) | {low:.1f}-{high:.1f}x | "
                  f"{censored}/{len(speedups)} | "
                  f"{row['common_speedup']:.1f}x | "
                  f"{row['utilisation']:.3f} | "
                  f"{row['decision_ms']:.2f} | {row['driver_load']:.4f} | {row['final_regret']:.4f} | "
                  f"{row['regret_quarter']:.4f}, {row['regret_window']:.4f} |")
    if getattr(args, "misses", False):
        for w in workers:
            for searcher in searchers:
                lines = missed_runs(problems, searcher, w, seeds, runs)
                print(f"\n{searcher}, {w} workers: {len(lines)} runs missed their target" + (":" if lines else ""))
                for line in lines:
                    print(f"- {line}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    if args.plot:
        plot(problems, searchers, workers, seeds, runs, references, args.plot)


def plot(problems, searchers, workers, seeds, runs, references, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.logspace(-4, 0, 60)
    fig, axes = plt.subplots(1, len(workers), figsize=(4 * len(workers), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, w in zip(axes, workers):
        for searcher in searchers:
            curves = []
            for problem in problems:
                for seed in seeds:
                    base = runs.get((problem.name, REFERENCE, 1, seed))
                    run = runs[(problem.name, searcher, w, seed)]
                    scale = max(regret_at(base.trace, base.end, references[problem.name]), 1e-6) if base else 1.0
                    # Every run up to its window, and no further: past it only the runs whose last trial
                    # ended late would be averaged. A run stopped at its target keeps its last regret,
                    # which it could only have lowered, so the runs left are not just the ones that missed.
                    curves.append([max(regret_at(run.trace, g * problem.t1, references[problem.name]), 1e-6) / scale
                                   if g * problem.t1 <= run.window else math.nan for g in grid])
            values = np.array(curves)
            with np.errstate(all="ignore"), warnings_off():
                mean = np.exp(np.nanmean(np.log(values), axis=0))
            ax.plot(grid, mean, label=searcher)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{w} worker{'s' if w > 1 else ''}")
        ax.set_xlabel("simulated time / T1")
    axes[0].set_ylabel("regret / random's final regret on 1 worker")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


@contextlib.contextmanager
def warnings_off():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


if __name__ == "__main__":
    main()
