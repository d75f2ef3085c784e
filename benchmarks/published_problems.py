"""Published multi-fidelity benchmarks as `benchmarks.mf_problems.Problem`s, all minimised.

- LCBench through YAHPO Gym's surrogate (Zimmer et al. 2021; Pfisterer et al., AutoML-Conf
  2022): the loss is 1 - val_balanced_accuracy (0..1) of a funnel MLP on an OpenML task,
  fidelity the epoch, 1..52. The surrogate is deterministic (YAHPO's `noisy=False`): what a
  searcher sees at epoch 52 is the exact value. It has no known optimum: `optimum` is 0 and
  the benchmark measures regret from a reference it finds (`published.py`).
- MFHartmann (mf-prior-bench, the PriorBand paper's synthetic set): Hartmann 3 or 6 with a
  bias that flattens it and a noise that shrinks with the fidelity z, 1..100; exact at 100,
  known optimum. The run's seed seeds the noise.
- rbv2_xgboost through YAHPO Gym's surrogate (Binder, Pfisterer and Bischl 2020): XGBoost on
  an OpenML task, the loss 1 - acc. The space is conditional: `booster` gates six parameters
  (gbtree and dart) and two more (dart only), declared with `when`; inactive parameters are
  dropped before the surrogate is queried, so a flat config scores as its active part. The
  budget b in 1..27 trains on the fraction trainsize = max(0.03, b / 27) of the training
  set, `repl` fixed to 10, from scratch: nothing continues, and the benchmark charges every
  evaluation its full budget (`Published.from_scratch`). `nrounds` is capped at 1,500 for
  every booster: above about 1,600 with `dart` the surrogate extrapolates to an accuracy near
  1.0 on most tasks (the data's README), and a searcher that finds that region learns the
  surrogate, not XGBoost. No known optimum, as LCBench. Tuning tasks: `RBV2_TUNING`; the
  other tasks are held out.

A budget b is queried at the fidelity round(b) on LCBench and MFHartmann (their epochs and z
are integers); the budget accounting stays in b. Those two also give their learning curve
(`curve`), the values at every integer fidelity of a continuation, for searchers that use it;
rbv2_xgboost has none. Each needs the benchmark venv (`benchmarks/setup_bench_env.sh`); the
surrogates and mf-prior-bench are imported lazily.
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from benchmarks.mf_problems import Problem, is_active

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
FAMILIES = ("lcbench", "mfhartmann", "rbv2_xgboost")

# rbv2_xgboost's 119 OpenML tasks (the surrogate's instances), and the 8 defaults may be tuned on.
RBV2_TASKS = ("16", "40923", "41143", "470", "1487", "40499", "40966", "41164", "1497", "40975", "1461", "41278",
              "11", "54", "300", "40984", "31", "1067", "1590", "40983", "41163", "41165", "182", "1220", "41159",
              "41169", "42", "188", "1457", "1480", "6332", "181", "1479", "40670", "40536", "41138", "41166", "6",
              "14", "29", "458", "1056", "1462", "1494", "40701", "12", "1493", "44", "307", "334", "40982",
              "41142", "38", "1050", "469", "23381", "41157", "15", "4541", "23", "4134", "40927", "40981",
              "41156", "3", "1049", "40900", "1063", "23512", "40979", "1040", "1068", "41161", "22", "1489",
              "41027", "24", "4135", "23517", "1053", "1468", "312", "377", "1515", "18", "1476", "1510", "41162",
              "28", "375", "1464", "40685", "40996", "41146", "41216", "40668", "41212", "32", "60", "4538",
              "40496", "41150", "37", "46", "554", "1475", "1485", "1501", "1111", "4534", "41168", "151", "4154",
              "40978", "40994", "50", "1478", "1486", "40498")
RBV2_TUNING = ("15", "29", "50", "182", "470", "1050", "1464", "41164")
RBV2_NROUNDS_CAP = 1500       # the dart artifact above about 1,600 rounds (module docstring)
RBV2_MAX_BUDGET = 27.0        # budgets 1..27, eta 3: trainsize 1/27, 1/9, 1/3, 1
RBV2_MIN_TRAINSIZE = 0.03     # the surrogate's lower bound
RBV2_REPL = 10
_TREES = {"when": {"booster": ["gbtree", "dart"]}}
_DART = {"when": {"booster": "dart"}}
_E = 2.718281828459045
# The surrogate's own ranges (its config_space.json), nrounds capped; parents before children.
RBV2_SPACE = {
    "booster": {"type": "choice", "values": ["gblinear", "gbtree", "dart"]},
    "alpha": {"type": "float", "low": 0.0009118819655545162, "high": 1096.6331584284585, "log": True},
    "lambda": {"type": "float", "low": 0.0009118819655545162, "high": 1096.6331584284585, "log": True},
    "nrounds": {"type": "int", "low": 7, "high": RBV2_NROUNDS_CAP, "log": True},
    "subsample": {"type": "float", "low": 0.1, "high": 1.0},
    "num.impute.selected.cpo": {"type": "choice", "values": ["impute.mean", "impute.median", "impute.hist"]},
    "eta": {"type": "float", "low": 0.0009118819655545162, "high": 1.0, "log": True, **_TREES},
    "gamma": {"type": "float", "low": 4.5399929762484854e-05, "high": 7.38905609893065, "log": True, **_TREES},
    "max_depth": {"type": "int", "low": 1, "high": 15, **_TREES},
    "min_child_weight": {"type": "float", "low": _E, "high": 148.4131591025766, "log": True, **_TREES},
    "colsample_bytree": {"type": "float", "low": 0.01, "high": 1.0, **_TREES},
    "colsample_bylevel": {"type": "float", "low": 0.01, "high": 1.0, **_TREES},
    "rate_drop": {"type": "float", "low": 0.0, "high": 1.0, **_DART},
    "skip_drop": {"type": "float", "low": 0.0, "high": 1.0, **_DART},
}

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
    family: str                      # one of FAMILIES
    min_budget: float
    max_budget: float
    optimum_known: bool
    # curve(config, start, stop, run_seed) -> the values at fidelities start+1 .. stop; None where
    # a larger budget trains from scratch and no learning curve comes with it
    curve: Callable[[Mapping[str, Any], int, int, int], list[float]] | None
    tuning: bool
    # Every evaluation is charged its full budget (nothing continues from a lower one).
    from_scratch: bool = False

    @property
    def name(self) -> str:
        return self.problem.name


def fidelity_of(budget: float) -> int:
    return max(1, int(round(budget)))


def active(space: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's active part: the space's parameters whose `when` holds, in the space's order.
    What a flat config (every parameter present) becomes before the surrogate is queried."""
    return {name: config[name] for name, spec in space.items() if name in config and is_active(spec, config)}


# --- LCBench ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _yahpo_session(data_path: str) -> None:
    """YAHPO Gym, set up once per process for every scenario."""
    import ConfigSpace as CS
    # yahpo-gym 1.0.1 calls a private method ConfigSpace 1.x no longer has (the data's README).
    CS.ConfigurationSpace._sort_hyperparameters = lambda self: None
    from yahpo_gym import local_config
    # 1.0.1 ignores YAHPO_LOCAL_CONFIG: keep its settings file out of the home folder.
    local_config.settings_path = Path(tempfile.mkdtemp()) / "settings.yaml"
    local_config.init_config(data_path=data_path)


@functools.lru_cache(maxsize=None)
def _yahpo(data_path: str):
    """One surrogate session for every task."""
    _yahpo_session(data_path)
    from yahpo_gym import BenchmarkSet
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
    """`n` uniform configs (log-uniform where the space says so; a choice's values equally
    likely) from a seeded generator, each without the parameters its `when` leaves inactive."""
    rng = np.random.default_rng(seed)
    columns = {}
    for name, spec in space.items():
        if spec["type"] == "choice":
            columns[name] = rng.integers(0, len(spec["values"]), n)
            continue
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
    def value(name: str, i: int):
        spec = space[name]
        if spec["type"] == "choice":
            return spec["values"][int(columns[name][i])]
        return int(columns[name][i]) if spec["type"] == "int" else float(columns[name][i])
    return [active(space, {name: value(name, i) for name in space}) for i in range(n)]


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


# --- rbv2_xgboost ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _yahpo_rbv2(data_path: str):
    _yahpo_session(data_path)
    from yahpo_gym import BenchmarkSet
    return BenchmarkSet("rbv2_xgboost", instance=RBV2_TUNING[0], check=False, multithread=False)


def trainsize_of(budget: float) -> float:
    """The fraction of the training set a budget trains on."""
    return max(RBV2_MIN_TRAINSIZE, float(budget) / RBV2_MAX_BUDGET)


class Rbv2Task:
    """Queries for one rbv2_xgboost task, memoised by (active config, trainsize)."""

    def __init__(self, task: str, data_path: str):
        self.task, self.data_path = task, data_path
        self._memo: dict[tuple, float] = {}

    def _query(self, configs: list[Mapping[str, Any]], trainsizes: list[float]) -> list[float]:
        configs = [active(RBV2_SPACE, c) for c in configs]
        keys = [(tuple(sorted(c.items())), t) for c, t in zip(configs, trainsizes)]
        missing = [i for i, k in enumerate(keys) if k not in self._memo]
        if missing:
            bench = _yahpo_rbv2(self.data_path)
            bench.set_instance(self.task)
            queries = [dict(configs[i], task_id=self.task, trainsize=float(trainsizes[i]), repl=RBV2_REPL)
                       for i in missing]
            for i, result in zip(missing, bench.objective_function(queries)):
                self._memo[keys[i]] = 1.0 - float(result["acc"])
        return [self._memo[k] for k in keys]

    def evaluate(self, config: Mapping[str, Any], budget: float, run_seed: int = 0) -> float:
        return self._query([config], [trainsize_of(budget)])[0]

    def exact(self, config: Mapping[str, Any]) -> float:
        return self._query([config], [1.0])[0]

    def random_best(self, samples: int = 20000, seed: int = 0) -> float:
        """The lowest loss on the whole training set among `samples` uniform configs of the
        capped space (a regret reference)."""
        configs = sample_configs(RBV2_SPACE, samples, seed)
        return float(min(self._query(configs, [1.0] * len(configs))))


def rbv2_xgboost(task: str, data_path: str = DEFAULT_YAHPO_DATA) -> Published:
    bench = Rbv2Task(task, data_path)
    problem = Problem(name=f"rbv2_xgboost_{task}", space=dict(RBV2_SPACE), optimum=0.0,
                      evaluate=bench.evaluate, exact=bench.exact)
    return Published(problem, "rbv2_xgboost", RBV2_MAX_BUDGET / 27, RBV2_MAX_BUDGET, False, None,
                     task in RBV2_TUNING, from_scratch=True)


def published_problems(which: str = "tuning", data_path: str = DEFAULT_YAHPO_DATA,
                       families: tuple[str, ...] = FAMILIES) -> dict[str, Published]:
    """'tuning' (defaults may be chosen on these), 'heldout' (every other task and variant) or
    'all', of the given families."""
    every = (([lcbench(t, data_path) for t in LCBENCH_TASKS] if "lcbench" in families else [])
             + ([mfhartmann(v) for v in MFH_VARIANTS] if "mfhartmann" in families else [])
             + ([rbv2_xgboost(t, data_path) for t in RBV2_TASKS] if "rbv2_xgboost" in families else []))
    if which == "tuning":
        every = [p for p in every if p.tuning]
    elif which == "heldout":
        every = [p for p in every if not p.tuning]
    return {p.name: p for p in every}
