"""Published multi-fidelity benchmarks as `benchmarks.mf_problems.Problem`s, all minimised.

- LCBench through YAHPO Gym's surrogate (Zimmer et al. 2021; Pfisterer et al., AutoML-Conf
  2022): the loss is 1 - val_balanced_accuracy (0..1) of a funnel MLP on an OpenML task,
  fidelity the epoch, 1..52. The surrogate is deterministic (YAHPO's `noisy=False`): what a
  searcher sees at epoch 52 is the exact value. It has no known optimum: `optimum` is 0 and
  the benchmark measures regret from a reference it finds (`published.py`).
- MFHartmann (mf-prior-bench, the PriorBand paper's synthetic set): Hartmann 3 or 6 with a
  bias that flattens it and a noise that shrinks with the fidelity z, 1..100; exact at 100,
  known optimum. The run's seed seeds the noise.

A budget b is queried at the fidelity round(b) (LCBench's epochs and MFHartmann's z are
integers); the budget accounting stays in b. Each problem also gives its learning curve
(`curve`), the values at every integer fidelity of a continuation, for searchers that use it.
Both need the benchmark venv (`benchmarks/setup_bench_env.sh`); they are imported lazily.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from benchmarks.mf_problems import Problem

DEFAULT_YAHPO_DATA = str(Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "yahpo_data")

LCBENCH_TASKS = ("3945", "7593", "34539", "126025", "126026", "126029", "146212", "167104", "167149", "167152",
                 "167161", "167168", "167181", "167184", "167185", "167190", "167200", "167201", "168329",
                 "168330", "168331", "168335", "168868", "168908", "168910", "189354", "189862", "189865",
                 "189866", "189873", "189905", "189906", "189908", "189909")
LCBENCH_TUNING = ("126025", "126029", "167149", "167152", "167161", "167181", "167184", "167185", "167190",
                  "167200", "168331", "168908")
MFH_VARIANTS = tuple(f"mfh{d}_{k}" for d in (3, 6) for k in ("good", "moderate", "bad", "terrible"))
MFH_TUNING = ("mfh3_moderate", "mfh3_bad", "mfh6_moderate", "mfh6_bad")
# The global minima of Hartmann 3 and 6 (what mf-prior-bench's metric bounds state).
MFH_OPTIMUM = {3: -3.86278, 6: -3.32237}

LCBENCH_SPACE = {
    "batch_size": {"type": "int", "low": 16, "high": 512, "log": True},
    "learning_rate": {"type": "float", "low": 1e-4, "high": 0.1, "log": True},
    "max_dropout": {"type": "float", "low": 0.0, "high": 1.0},
    "max_units": {"type": "int", "low": 64, "high": 1024, "log": True},
    "momentum": {"type": "float", "low": 0.1, "high": 0.99},
    "num_layers": {"type": "int", "low": 1, "high": 5},
    "weight_decay": {"type": "float", "low": 1e-5, "high": 0.1},
}


@dataclass(frozen=True)
class Published:
    """A problem with its own fidelity range, and what the report needs to know about it."""

    problem: Problem
    family: str                      # "lcbench" or "mfhartmann"
    min_budget: float
    max_budget: float
    optimum_known: bool
    # curve(config, start, stop, run_seed) -> the values at fidelities start+1 .. stop
    curve: Callable[[Mapping[str, Any], int, int, int], list[float]]
    tuning: bool

    @property
    def name(self) -> str:
        return self.problem.name


def fidelity_of(budget: float) -> int:
    return max(1, int(round(budget)))


# --- LCBench ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _yahpo(data_path: str):
    """One surrogate session for every task."""
    import ConfigSpace as CS
    # yahpo-gym 1.0.1 calls a private method ConfigSpace 1.x no longer has (the data's README).
    CS.ConfigurationSpace._sort_hyperparameters = lambda self: None
    from yahpo_gym import BenchmarkSet, local_config
    # 1.0.1 ignores YAHPO_LOCAL_CONFIG: keep its settings file out of the home folder.
    local_config.settings_path = Path(tempfile.mkdtemp()) / "settings.yaml"
    local_config.init_config(data_path=data_path)
    return BenchmarkSet("lcbench", instance=LCBENCH_TASKS[0], check=False, multithread=False)


class LCBenchTask:
    """Queries for one task, memoised: a promoted config is queried again at every rung, and
    the trace asks for the incumbent's value at epoch 52."""

    def __init__(self, task: str, data_path: str):
        self.task, self.data_path = task, data_path
        self._memo: dict[tuple, float] = {}

    def _bench(self):
        # The surrogate takes the task from the set's instance (a constant that overrides the
        # config's OpenML_task_id), so it is set before every query.
        bench = _yahpo(self.data_path)
        bench.set_instance(self.task)
        return bench

    def _query(self, configs: list[Mapping[str, Any]], epochs: list[int]) -> list[float]:
        keys = [(tuple(sorted(c.items())), e) for c, e in zip(configs, epochs)]
        missing = [i for i, k in enumerate(keys) if k not in self._memo]
        if missing:
            queries = [dict(configs[i], epoch=int(epochs[i])) for i in missing]
            results = self._bench().objective_function(queries)
            for i, result in zip(missing, results):
                self._memo[keys[i]] = 1.0 - float(result["val_balanced_accuracy"])
        return [self._memo[k] for k in keys]

    def evaluate(self, config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        return self._query([config], [fidelity_of(budget)])[0]

    def exact(self, config: Mapping[str, Any]) -> float:
        return self._query([config], [52])[0]

    def curve(self, config: Mapping[str, Any], start: int, stop: int, run_seed: int = 0) -> list[float]:
        epochs = list(range(start + 1, stop + 1))
        return self._query([config] * len(epochs), epochs)

    def random_best(self, samples: int = 20000, seed: int = 0) -> float:
        """The lowest loss at epoch 52 among `samples` uniform configs (a regret reference)."""
        configs = sample_configs(LCBENCH_SPACE, samples, seed)
        results = self._bench().objective_function([dict(c, epoch=52) for c in configs])
        return float(min(1.0 - float(r["val_balanced_accuracy"]) for r in results))


def sample_configs(space: Mapping[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """`n` uniform configs (log-uniform where the space says so) from a seeded generator."""
    rng = np.random.default_rng(seed)
    columns = {}
    for name, spec in space.items():
        low, high = float(spec["low"]), float(spec["high"])
        if spec["type"] == "int":
            low, high = low - 0.4999, high + 0.4999
        if spec.get("log"):
            values = np.exp(rng.uniform(np.log(max(low, 1e-12)), np.log(high), n))
        else:
            values = rng.uniform(low, high, n)
        if spec["type"] == "int":
            values = np.clip(np.round(values), spec["low"], spec["high"]).astype(int)
        columns[name] = values
    return [{name: (int(columns[name][i]) if space[name]["type"] == "int" else float(columns[name][i]))
             for name in space} for i in range(n)]


def lcbench(task: str, data_path: str = DEFAULT_YAHPO_DATA) -> Published:
    bench = LCBenchTask(task, data_path)
    problem = Problem(name=f"lcbench_{task}", space=dict(LCBENCH_SPACE), optimum=0.0,
                      evaluate=bench.evaluate, exact=bench.exact)
    return Published(problem, "lcbench", 52 / 27, 52.0, False, bench.curve, task in LCBENCH_TUNING)


# --- MFHartmann ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def _mfh(variant: str, seed: int):
    import mfpbench
    return mfpbench.get(variant, seed=seed)


def mfhartmann(variant: str) -> Published:
    dims = int(variant[3])
    names = [f"X_{i}" for i in range(dims)]

    def value(config: Mapping[str, Any], z: int, run_seed: int) -> float:
        # The generator directly: mf-prior-bench's query() builds a config and a result object
        # per call, several times the cost of the function itself.
        return float(_mfh(variant, run_seed).mfh(z=int(z), Xs=tuple(float(config[n]) for n in names)))

    def evaluate(config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        return value(config, min(100, fidelity_of(budget)), run_seed)

    def exact(config: Mapping[str, Any]) -> float:
        return value(config, 100, 0)   # the noise is 0 at z = 100 whatever the seed

    def curve(config: Mapping[str, Any], start: int, stop: int, run_seed: int = 0) -> list[float]:
        return [value(config, z, run_seed) for z in range(start + 1, stop + 1)]

    space = {n: {"type": "float", "low": 0.0, "high": 1.0} for n in names}
    problem = Problem(name=variant, space=space, optimum=MFH_OPTIMUM[dims], evaluate=evaluate, exact=exact)
    return Published(problem, "mfhartmann", 100 / 27, 100.0, True, curve, variant in MFH_TUNING)


def published_problems(which: str = "tuning", data_path: str = DEFAULT_YAHPO_DATA) -> dict[str, Published]:
    """'tuning' (defaults may be chosen on these), 'heldout' (every other task and variant) or 'all'."""
    every = [lcbench(t, data_path) for t in LCBENCH_TASKS] + [mfhartmann(v) for v in MFH_VARIANTS]
    if which == "tuning":
        every = [p for p in every if p.tuning]
    elif which == "heldout":
        every = [p for p in every if not p.tuning]
    return {p.name: p for p in every}
