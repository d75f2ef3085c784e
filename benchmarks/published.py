"""Searchers on published multi-fidelity benchmarks: LCBench and rbv2_xgboost (YAHPO Gym's
surrogates) and MFHartmann (mf-prior-bench). `benchmarks/published_problems.py` has the problems.

    bash benchmarks/setup_bench_env.sh        # once: the venvs (yahpo-gym, mf-prior-bench in each)
    nice -n 19 .venv-bench/bin/python benchmarks/published.py --cache /tmp/published-cache
    nice -n 19 .venv-bench-smac/bin/python benchmarks/published.py --cache /tmp/published-cache \\
        --only 'smac3 hyperband+rf' --seeds 5       # SMAC3 lives in its own venv; slow: fewer seeds
    nice -n 19 .venv-bench-neps/bin/python benchmarks/published.py --cache /tmp/published-cache \\
        --only 'neps priorband' --seeds 5           # so does NePS (torch, CPU build)
    nice -n 19 .venv-bench/bin/python benchmarks/published.py --family rbv2_xgboost --budget 20 \\
        --cache /tmp/published-cache                # the third family (LCBench and MFHartmann by default)

The harness, the budget accounting, the peers' drivers, the cache and the bootstrap intervals
are `benchmarks/searchers.py`'s: every searcher gets the same total budget, counted as the sum
of budgets (only the increment where a config already ran at a lower budget), and regret is
that of the incumbent (the best config evaluated at the full budget), measured at full
fidelity. Budgets: eta 3 over [max/27, max] (LCBench's epochs 52/27..52, MFHartmann's z
100/27..100, queried at the rounded fidelity; rbv2_xgboost's 1..27, the fraction b / 27 of
the training set). Total budget: 132 full-budget evaluations (10 Hyperband iterations,
counted by increments) and 20 (`--budget`). On rbv2_xgboost a larger fraction trains from
scratch, so every evaluation is charged its full budget, a promotion included
(`FromScratchTrace`), and our BOHB is told so (`resumes=False`: the problem's nature, as a
user would state it, not a setting tuned per task; `HPO_BOHB_OPTIONS` may override it).

Conditional spaces (rbv2_xgboost's booster gates eight parameters) reach every searcher that
takes conditions as conditions: ours through `when`, Optuna define-by-run (a parameter is
suggested only where it is active), DEHB, HpBandSter and SMAC3 through ConfigSpace conditions
(`problem_rules`); random search and "screen then full" draw only the active parameters.
Whatever a searcher hands back, the problem drops the inactive parameters before the surrogate
is queried. Freeze-thaw (it needs learning curves) and NePS's PriorBand (its space here has no
conditions) do not run there.

Regret on MFHartmann is from the known optimum. On LCBench and rbv2_xgboost it is from a
reference: the lowest loss (1 - val_balanced_accuracy, 1 - acc) any searcher's incumbent
reached on that task in any run this cache has seen, or the best of 20,000 uniform configs at
the full budget, whichever is lower.
The reference only falls as runs are added (`references.json` in the cache), so every
regret is a lower bound on the truth and the ratios are comparable within one report.

Peers: Optuna TPE (full budget only) and TPE with its HyperbandPruner, DEHB, HpBandSter BOHB,
SMAC3's multi-fidelity facade (`.venv-bench-smac`), NePS's PriorBand (`.venv-bench-neps`; its
prior is the centre of the space, as no benchmark here defines one: `run_neps_priorband`),
random search at the full budget, and "screen then full": half the budget on as many configs
at the minimum budget as it buys, the rest continuing the best of them to the full budget. Ours: `hpo.search.SEARCHERS`'
random, hyperband, bohb, and freeze_thaw where it exists. Our searchers are told a
`TrialResult` with the learning curve of the job (the value at every integer fidelity the
job trained through) in `metrics` ("curve/<fidelity>"), and in a `curve` field where
`TrialResult` has one (`trial_result`).

A peer that is too slow for every seed (`--partial NAME`, default SMAC3, HpBandSter and NePS) is
reported over the seeds the cache holds for it (the table says how many). Ours are cached
too, keyed by a hash of `hpo/search/`'s sources, so a change there reruns them.

The tuning set (`--set tuning`, the default) is the one defaults may be chosen on; the
held-out set (`--set heldout`) is every other task and MFHartmann variant. `--family` picks
the families (default LCBench and MFHartmann; `all` adds rbv2_xgboost). Per problem and
budget: the mean final regret of every searcher; for "hpo bohb" the ratio of its mean final
regret to the best peer's, with a 95% bootstrap interval; on the accuracy-type families
(LCBench, rbv2_xgboost) also whether ours is within 0.002 (0.2 points of accuracy) of the best
peer's. Then per family `published_geomean_ratio_<family>=` and `published_worst_ratio_<family>=`,
and the last line `published_geomean_ratio=` and `published_worst_ratio=` over every problem
and budget reported.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks.searchers as harness  # noqa: E402
from benchmarks.mf_problems import Problem  # noqa: E402
from benchmarks.published_problems import (  # noqa: E402
    FAMILIES,
    Published,
    active,
    fidelity_of,
    published_problems,
    sample_configs,
)
from benchmarks.searchers import (  # noqa: E402
    FRACTIONS,
    Outcome,
    PeerCache,
    Trace,
    geomean_of,
    mean_final,
    ratio_interval,
    regret_ratio,
)
from hpo.search import SEARCHERS as HPO_SEARCHERS  # noqa: E402
from hpo.search import rung_budgets  # noqa: E402
from hpo.trial import TrialResult  # noqa: E402

BUDGETS = (132, 20)               # total budget, in full-budget evaluations
LCBENCH_TOLERANCE = 0.002         # an accuracy-type problem passes where ours is this close to the best peer
ACCURACY_FAMILIES = ("lcbench", "rbv2_xgboost")
DEFAULT_FAMILIES = ("lcbench", "mfhartmann")
RANDOM_REFERENCE_SAMPLES = 20000
OURS = ("random", "hyperband", "bohb", "freeze_thaw")   # by name in hpo.search.SEARCHERS, where present
DEFAULT = "hpo bohb"


@contextlib.contextmanager
def fidelity_range(published: Published):
    """The peers' drivers in `searchers.py` read the budget range from its module globals
    (its own problems all run over 1..27): set them to this problem's for the run."""
    saved = harness.MIN_BUDGET, harness.MAX_BUDGET, harness.RUNGS
    harness.MIN_BUDGET, harness.MAX_BUDGET = published.min_budget, published.max_budget
    harness.RUNGS = rung_budgets(published.min_budget, published.max_budget, harness.ETA)
    try:
        yield
    finally:
        harness.MIN_BUDGET, harness.MAX_BUDGET, harness.RUNGS = saved


class FromScratchTrace(Trace):
    """The trace where nothing continues: every evaluation is charged its full budget, also
    for a config that already ran at a lower one (a larger training fraction trains anew)."""

    def evaluate(self, config: Mapping[str, Any], budget: float) -> float:
        self._deepest.clear()
        return super().evaluate(config, budget)


def conditional(space: Mapping[str, Any]) -> bool:
    return any("when" in spec for spec in space.values())


_flat_configspace = harness._configspace


def configspace_with_conditions(problem: Problem, seed: int):
    """`searchers.py`'s ConfigSpace space, with each `when` as a condition (an equality or an
    `in` per parent, joined by `and` where a parameter has several parents)."""
    import ConfigSpace as CS
    cs = _flat_configspace(problem, seed)
    for name, spec in problem.space.items():
        parts = []
        for parent, allowed in spec.get("when", {}).items():
            allowed = list(allowed) if isinstance(allowed, (list, tuple)) else [allowed]
            if problem.space[parent]["type"] == "choice":
                allowed = [str(v) for v in allowed]
            parts.append(CS.EqualsCondition(cs[name], cs[parent], allowed[0]) if len(allowed) == 1
                         else CS.InCondition(cs[name], cs[parent], allowed))
        if parts:
            cs.add(parts[0] if len(parts) == 1 else CS.AndConjunction(*parts))
    return cs


def typed_active(problem: Problem, config: Mapping[str, Any]) -> dict[str, Any]:
    """`searchers.py`'s `typed` for a conditional space: the parameters a peer handed back,
    cast to the space's types, the inactive ones dropped."""
    present = {name: spec for name, spec in problem.space.items() if name in config}
    return active(problem.space, harness_typed(dataclasses.replace(problem, space=present), config))


harness_typed = harness.typed


@contextlib.contextmanager
def problem_rules(published: Published):
    """What the peers' drivers in `searchers.py` read from its module globals, set for this
    problem: the budget range (`fidelity_range`), the trace (`FromScratchTrace` where nothing
    continues), and on a conditional space the conditions (ConfigSpace conditions; Optuna's
    define-by-run `_suggest` reads `when` itself) and the cast that drops inactive parameters."""
    names = ("Trace", "_configspace", "typed")
    saved = {name: getattr(harness, name) for name in names}
    harness.Trace = FromScratchTrace if published.from_scratch else Trace
    if conditional(published.problem.space):
        harness._configspace = configspace_with_conditions
        harness.typed = typed_active
    try:
        with fidelity_range(published):
            yield
    finally:
        for name, value in saved.items():
            setattr(harness, name, value)


# --- ours ------------------------------------------------------------------------------------

def trial_result(value: float, fidelities: list[int], curve: list[float]) -> TrialResult:
    """The adapter between a job's learning curve and what our searchers are told: the value
    at the job's budget, and the curve over the fidelities it trained through (a continuation
    from a to b: a+1..b) as metrics, and as `curve` where TrialResult has that field."""
    metrics = {f"curve/{f}": float(v) for f, v in zip(fidelities, curve)}
    if "curve" in {f.name for f in dataclasses.fields(TrialResult)}:
        return TrialResult(value=value, metrics=metrics, curve=tuple(float(v) for v in curve))
    return TrialResult(value=value, metrics=metrics)


def run_hpo(algorithm: str, published: Published | None = None, record: list | None = None,
            keep: dict | None = None):
    """Our searcher `algorithm`, ask/tell over the trace. For the diagnosis: `record` gets
    one (job, value, budget spent so far) per evaluation, `keep["searcher"]` the searcher."""
    def run(problem: Problem, seed: int, total: float) -> Trace:
        trace = harness.Trace(problem, seed, total)     # FromScratchTrace under problem_rules where it applies
        options = {}
        if algorithm == "bohb":
            # Where nothing continues, BOHB is told so (as a user would); HPO_BOHB_OPTIONS may say otherwise.
            options = {**({"resumes": False} if published is not None and published.from_scratch else {}),
                       **harness.BOHB_OPTIONS}
        searcher = harness.told_the_budget(HPO_SEARCHERS[algorithm](
            problem.space, seed=seed, min_budget=harness.MIN_BUDGET, max_budget=harness.MAX_BUDGET,
            eta=harness.ETA, **options), total, options)
        if keep is not None:
            keep["searcher"] = searcher
        trained: dict[str, int] = {}          # config -> the highest fidelity it trained to
        while not trace.exhausted:
            job = searcher.ask()
            key = repr(sorted(job.config.items()))
            start, stop = trained.get(key, 0), fidelity_of(job.budget)
            value = trace.evaluate(job.config, job.budget)
            trained[key] = max(start, stop)
            if record is not None:
                record.append((job, value, trace.costs[-1]))
            if published is not None and published.curve is None:
                searcher.tell(job, TrialResult(value=value))
            elif published is not None:
                fidelities = list(range(start + 1, stop + 1))
                curve = published.curve(job.config, start, stop, seed) if fidelities else []
                searcher.tell(job, trial_result(value, fidelities, curve))
            else:
                searcher.tell(job, value)
        return trace.finish()
    run.searcher = algorithm
    return run


# --- our own peers: random search and "screen then full" ------------------------------------

def run_random(problem: Problem, seed: int, total: float) -> Trace:
    """Uniform configs (log-uniform where the space says so) at the full budget."""
    trace = harness.Trace(problem, seed, total)
    block = 0
    while not trace.exhausted:
        for config in sample_configs(problem.space, 256, seed * 1000 + block):
            if trace.exhausted:
                break
            trace.evaluate(config, harness.MAX_BUDGET)
        block += 1
    return trace.finish()


def run_screen(problem: Problem, seed: int, total: float) -> Trace:
    """The simplest multi-fidelity baseline: half the budget trains as many uniform configs
    as it buys for the minimum budget, the other half continues the best of them (in order)
    to the full budget."""
    low, high = harness.MIN_BUDGET, harness.MAX_BUDGET
    trace = harness.Trace(problem, seed, total)
    screened = sample_configs(problem.space, max(1, int(total / 2 / low)), seed + 7919)
    scores = [trace.evaluate(config, low) for config in screened]
    try:
        for index in np.argsort(scores, kind="stable"):
            trace.evaluate(screened[index], high)
        while not trace.exhausted:     # only where every screened config reached the top
            trace.evaluate(sample_configs(problem.space, 1, seed + len(trace.costs))[0], high)
    except harness.BudgetSpent:
        pass
    return trace.finish()


# --- NePS PriorBand ----------------------------------------------------------------------------

def neps_space(problem: Problem, min_budget: float, max_budget: float, fidelity: str):
    """The problem's space for NePS, each parameter's prior its centre as NePS defines it (the
    midpoint, in log space where the parameter is log-scaled, rounded for integers; a
    categorical's first value) at NePS's default confidence ("low"), and the budget as a float
    fidelity over [min_budget, max_budget]."""
    import neps

    parameters: dict[str, Any] = {}
    for name, spec in problem.space.items():
        if spec["type"] == "choice":
            parameters[name] = neps.Categorical(list(spec["values"]), prior=spec["values"][0])
            continue
        kind = neps.Integer if spec["type"] == "int" else neps.Float
        centre = kind(spec["low"], spec["high"], log=spec.get("log", False)).center
        parameters[name] = kind(spec["low"], spec["high"], log=spec.get("log", False), prior=centre)
    parameters[fidelity] = neps.Float(float(min_budget), float(max_budget), is_fidelity=True)
    return neps.SearchSpace(parameters)


def run_neps_priorband(problem: Problem, seed: int, total: float) -> Trace:
    """NePS's PriorBand (`neps.algorithms.priorband`, its defaults: Hyperband brackets, eta 3,
    no BO), ask/tell. Its prior is the space's centre (`neps_space`): neither LCBench nor
    MFHartmann comes with one here (mf-prior-bench's prior files are not in its wheel), and a
    prior from the benchmark's good configs would tell it what the other searchers must find.
    A promotion continues the config at the next rung: the trace counts the increment. NePS
    draws from numpy's, torch's and Python's global generators: all three are seeded."""
    import random

    import torch
    from neps import AskAndTell
    from neps.optimizers.algorithms import priorband

    fidelity = "__budget"
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    trace = harness.Trace(problem, seed, total)
    optimizer = AskAndTell(priorband(neps_space(problem, harness.MIN_BUDGET, harness.MAX_BUDGET, fidelity),
                                     eta=harness.ETA))
    while not trace.exhausted:
        trial = optimizer.ask()
        config = dict(trial.config)
        budget = float(config.pop(fidelity))
        optimizer.tell(trial, trace.evaluate(harness.typed(problem, config), budget))
    return trace.finish()


PEER_RUNNERS: dict[str, Callable[[Problem, int, float], Trace]] = {
    "optuna tpe": harness.SEARCHERS["optuna tpe"],
    "optuna tpe+hyperband": harness.SEARCHERS["optuna tpe+hyperband"],
    "dehb": harness.SEARCHERS["dehb"],
    "smac3 hyperband+rf": harness.SEARCHERS["smac3 hyperband+rf"],
    "hpbandster bohb": harness.SEARCHERS["hpbandster bohb"],
    "neps priorband": run_neps_priorband,
    "random search": run_random,
    "screen then full": run_screen,
}
OUR_RUNNERS = {f"hpo {name}": name for name in OURS if name in HPO_SEARCHERS}
NAMES = list(OUR_RUNNERS) + list(PEER_RUNNERS)
PARTIAL = ("smac3 hyperband+rf", "hpbandster bohb", "neps priorband")
NEEDS_CURVES = ("hpo freeze_thaw",)      # learning-curve searchers: not where a budget trains from scratch


def runs_on(name: str, published: Published) -> bool:
    """Whether searcher `name` is run on this problem: freeze-thaw needs learning curves, and
    NePS's space here (`neps_space`) has no conditions."""
    if name in NEEDS_CURVES and published.curve is None:
        return False
    return not (name == "neps priorband" and conditional(published.problem.space))


def hpo_source_hash() -> str:
    """Ours are cached under a hash of hpo/search's sources (and of hpo/space.py and
    hpo/trial.py), so a change to a searcher reruns them."""
    root = Path(__file__).resolve().parents[1] / "hpo"
    digest = hashlib.sha1()
    for path in sorted(list((root / "search").rglob("*.py")) + [root / "space.py", root / "trial.py"]):
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def make_runner(problems: Mapping[str, Published]):
    def run(name: str, problem: Problem, seed: int, total: float) -> Outcome:
        published = problems[problem.name]
        with problem_rules(published):
            if name in OUR_RUNNERS:
                trace = run_hpo(OUR_RUNNERS[name], published)(published.problem, seed, total)
            else:
                trace = PEER_RUNNERS[name](published.problem, seed, total)
        return Outcome.of(trace)
    return run


class Cache(PeerCache):
    """searchers.py's cache; ours go in under a name carrying the hash of hpo's searchers."""

    def __init__(self, folder, problems, ours_tag: str, bohb_options: dict | None = None):
        """`bohb_options`: the BOHB variant "hpo bohb" names (default: HPO_BOHB_OPTIONS)."""
        super().__init__(folder, run=make_runner(problems), peers=NAMES)
        self.ours_tag = ours_tag
        self.bohb_options = harness.BOHB_OPTIONS if bohb_options is None else bohb_options
        self._only: set[str] = set()

    def _file(self, name: str, problem: str) -> Path:
        tagged = f"{name} {self.ours_tag}" if name in OUR_RUNNERS else name
        if name == DEFAULT and self.bohb_options:     # a variant (HPO_BOHB_OPTIONS) is cached apart
            tagged += " " + hashlib.sha1(json.dumps(self.bohb_options, sort_keys=True).encode()).hexdigest()[:8]
        return super()._file(tagged, problem)

    def cached(self, name: str, problem: Problem, seeds: range, total: float) -> list[Outcome]:
        """The outcomes the cache holds for these seeds (a partial peer's)."""
        if self.folder is None:
            return []
        data = self._load(name, problem.name)
        return [self._from(data[f"{seed}|{total:g}"]) for seed in seeds if f"{seed}|{total:g}" in data]

    @staticmethod
    def _from(entry) -> Outcome:
        return Outcome({f: r for f, r in entry["regret"]}, entry["overhead_ms"])


# --- references and regret ------------------------------------------------------------------

class References:
    """LCBench's regret references, per task: min(best of a random sample at epoch 52, best
    incumbent any run reached). Kept in the cache folder; they only ever fall."""

    def __init__(self, folder: str | None):
        self.path = Path(folder) / "references.json" if folder else None
        self.values: dict[str, dict[str, float]] = json.loads(self.path.read_text()) \
            if self.path and self.path.exists() else {}

    def of(self, published: Published, outcomes: list[Outcome]) -> float:
        entry = self.values.setdefault(published.name, {})
        if "random_best" not in entry:
            entry["random_best"] = published.problem.evaluate.__self__.random_best(RANDOM_REFERENCE_SAMPLES)
        found = min([o.regret[1.0] for o in outcomes] + [entry.get("found_best", math.inf)])
        entry["found_best"] = found
        return min(entry["random_best"], found)

    def save(self) -> None:
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.values, indent=1))


def shifted(outcomes: list[Outcome], reference: float) -> list[Outcome]:
    return [Outcome({f: r - reference for f, r in o.regret.items()}, o.overhead_ms) for o in outcomes]


# --- report ----------------------------------------------------------------------------------

def compare(published: Published, runs: Mapping[str, list[Outcome]], searcher: str = DEFAULT) -> dict[str, Any] | None:
    """`searcher` (default: the default searcher) against the best peer (lowest mean final
    regret) on one problem."""
    if searcher not in runs:
        return None
    peers = {name: mean_final(r) for name, r in runs.items() if name in PEER_RUNNERS}
    if not peers:
        return None
    best = min(peers, key=peers.get)
    ours = mean_final(runs[searcher])
    ratio = float(regret_ratio(ours, peers[best]))
    low, high = ratio_interval(runs[searcher], runs[best])
    within = published.family in ACCURACY_FAMILIES and ours - peers[best] <= LCBENCH_TOLERANCE
    return {"ours": ours, "best": best, "peer": peers[best], "ratio": ratio, "low": low, "high": high,
            "within": within}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, nargs="*", choices=BUDGETS, default=list(BUDGETS),
                        help="total budget in full-budget evaluations (default: both)")
    parser.add_argument("--quick", action="store_true", help="5 seeds, the budget of 20 only, unless given")
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0 .. seeds-1 (default 20, quick 5)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="run only these searchers")
    parser.add_argument("--problems", nargs="*", help="run only these problems (lcbench_<task>, mfh3_bad, ...)")
    parser.add_argument("--set", choices=("tuning", "heldout", "all"), default="tuning",
                        help="the problems defaults may be chosen on (default), the held-out ones, or all")
    parser.add_argument("--family", nargs="*", choices=FAMILIES + ("all",), default=list(DEFAULT_FAMILIES),
                        help="the benchmark families (default: lcbench mfhartmann; all: rbv2_xgboost too)")
    parser.add_argument("--yahpo-data", default="../shared/benchmarks/yahpo_data",
                        help="YAHPO Gym's data folder (with lcbench/), relative to the checkout")
    parser.add_argument("--cache", default=None, help="a folder keeping every searcher's outcomes between runs")
    parser.add_argument("--partial", nargs="*", default=list(PARTIAL),
                        help="peers reported over the seeds the cache holds, run for none (slow ones)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    root = Path(__file__).resolve().parents[1]
    data = Path(args.yahpo_data)
    data = data if data.is_absolute() else (root / data).resolve()
    budgets = args.budget if not (args.quick and args.budget == list(BUDGETS)) else [20]
    seeds_n = args.seeds or (5 if args.quick else 20)
    seeds = range(args.first_seed, args.first_seed + seeds_n)
    families = FAMILIES if "all" in args.family else tuple(args.family)
    if args.problems:             # a named problem brings its family
        families = FAMILIES
    every = published_problems(args.set, str(data), families)
    unknown_problems = set(args.problems or ()) - set(every)
    if unknown_problems:
        parser.error(f"not in the {args.set} set: {sorted(unknown_problems)}")
    problems = [every[n] for n in (args.problems or every)]
    names = [n for n in (args.only or NAMES) if n in NAMES]
    # The slow peers are reported from the cache whichever searchers run (run only when named).
    names += [n for n in args.partial if n in NAMES and n not in names]
    unknown = set(args.only or ()) - set(NAMES)
    if unknown:
        parser.error(f"unknown searchers {sorted(unknown)}; expected some of {NAMES}")
    cache = Cache(args.cache, every, hpo_source_hash())
    references = References(args.cache)
    print(f"set {args.set}: {len(problems)} problems, budgets {budgets} full-budget evaluations, seeds "
          f"{seeds.start}..{seeds.stop - 1}, eta {harness.ETA}, hpo searchers {hpo_source_hash()}")

    raw: dict[tuple[str, int, str], list[Outcome]] = {}
    for published in problems:
        for total_evals in budgets:
            total = total_evals * published.max_budget
            for name in names:
                if not runs_on(name, published):
                    continue
                started = time.perf_counter()
                if name in args.partial and name not in (args.only or ()):
                    runs = cache.cached(name, published.problem, seeds, total)
                else:
                    runs = [cache.get(name, published.problem, seed, total) for seed in seeds]
                if runs:
                    raw[published.name, total_evals, name] = runs
                print(f"  {published.name:16s} {total_evals:4d} {name:22s} {len(runs):3d} seeds "
                      f"{time.perf_counter() - started:7.1f}s", flush=True)

    shown: dict[tuple[str, int], dict[str, list[Outcome]]] = {}
    for published in problems:
        reference = published.problem.optimum if published.optimum_known else None
        if reference is None:
            # raw LCBench outcomes hold the loss itself (optimum 0); every budget's runs count
            found = [o for (p, _, _), runs in raw.items() if p == published.name for o in runs]
            reference = references.of(published, found)
            print(f"{published.name}: reference loss {reference:.5f} "
                  f"(random sample {references.values[published.name]['random_best']:.5f})")
        for total_evals in budgets:
            runs = {name: (shifted(raw[published.name, total_evals, name], reference)
                           if not published.optimum_known else raw[published.name, total_evals, name])
                    for name in names if (published.name, total_evals, name) in raw}
            shown[published.name, total_evals] = runs
    references.save()
    report(problems, budgets, names, shown)


def report(problems: list[Published], budgets, names, shown) -> None:
    print("\nMean final regret (LCBench: of 1 - val_balanced_accuracy; MFHartmann: from the optimum), "
          "seeds in brackets where fewer than the rest:\n")
    header = " | ".join(f"{n}" for n in names)
    for total_evals in budgets:
        print(f"**{total_evals} full-budget evaluations**\n")
        print(f"| problem | {header} |")
        print("| --- |" + " --- |" * len(names))
        for published in problems:
            runs = shown[published.name, total_evals]
            most = max((len(r) for r in runs.values()), default=0)
            cells = []
            for name in names:
                if name not in runs:
                    cells.append("n/a")
                    continue
                cell = f"{mean_final(runs[name]):.4g}"
                cells.append(cell + (f" ({len(runs[name])})" if len(runs[name]) < most else ""))
            print(f"| {published.name} | " + " | ".join(cells) + " |")
        print()

    print("Mean ± std regret of the incumbent at 25%, 50% and 100% of the budget; overhead per evaluation "
          "(median over runs, ms).\n")
    for published in problems:
        for total_evals in budgets:
            runs = shown[published.name, total_evals]
            print(f"**{published.name}, {total_evals} full-budget evaluations**\n")
            print("| searcher | seeds | 25% | 50% | 100% | overhead ms/eval |")
            print("| --- | --- | --- | --- | --- | --- |")
            for name in names:
                if name not in runs:
                    continue
                cells = [f"{np.mean([o.regret[f] for o in runs[name]]):.4g} ± "
                         f"{np.std([o.regret[f] for o in runs[name]]):.2g}" for f in FRACTIONS]
                overhead = statistics.median(o.overhead_ms for o in runs[name])
                print(f"| {name} | {len(runs[name])} | " + " | ".join(cells) + f" | {overhead:.3f} |")
            print()

    print("Each of ours against the best peer: geometric mean over problems of the ratio of mean final "
          "regrets (worst problem):")
    for name in (n for n in names if n in OUR_RUNNERS):
        cells = []
        for total_evals in budgets:
            found = [(result["ratio"], published.name) for published in problems
                     if (result := compare(published, shown[published.name, total_evals], name)) is not None]
            if found:
                worst = max(found)
                cells.append(f"at {total_evals}: {geomean_of([r for r, _ in found]):.3f} ({worst[0]:.3f} {worst[1]})")
        if cells:
            print(f"  {name}: " + "; ".join(cells))
    print()

    ratios, passed, by_budget = [], 0, {}
    print(f"{DEFAULT} against the best peer (ratio of mean final regrets, 95% bootstrap interval):")
    for total_evals in budgets:
        for published in problems:
            result = compare(published, shown[published.name, total_evals])
            if result is None:
                continue
            ratios.append(result["ratio"])
            by_budget.setdefault((published.family, total_evals), []).append(result["ratio"])
            passed += result["ratio"] <= 1 or result["within"]
            within = ""
            if published.family in ACCURACY_FAMILIES:
                within = (f"; within {LCBENCH_TOLERANCE} of it: "
                          f"{'yes' if result['within'] else 'no'} ({result['ours'] - result['peer']:+.4f})")
            print(f"  {published.name} @{total_evals}: {result['ours']:.4g} vs {result['peer']:.4g} "
                  f"({result['best']}) -> ratio {result['ratio']:.3f} "
                  f"(95% interval {result['low']:.2f}-{result['high']:.2f}){within}")
    if ratios:
        for (family, total_evals), values in sorted(by_budget.items()):
            print(f"  {family} at {total_evals} full-budget evaluations: geometric mean {geomean_of(values):.3f}, "
                  f"worst {max(values):.3f}, {sum(r <= 1 for r in values)} of {len(values)} at ratio <= 1")
        for family in sorted({f for f, _ in by_budget}):
            values = [r for (f, _), rs in by_budget.items() if f == family for r in rs]
            print(f"published_geomean_ratio_{family}={geomean_of(values):.3f} "
                  f"published_worst_ratio_{family}={max(values):.3f}")
        print(f"{passed} of {len(ratios)} (problem, budget) pairs pass (ratio <= 1, or on LCBench and rbv2 within "
              f"{LCBENCH_TOLERANCE} of the best peer); {sum(not 0 < r < math.inf for r in ratios)} infinite or "
              f"zero ratios left out of the geometric mean")
        print(f"published_geomean_ratio={geomean_of(ratios):.3f} published_worst_ratio={max(ratios):.3f}")



if __name__ == "__main__":
    main()
