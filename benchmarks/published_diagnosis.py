"""Where BOHB's budget and proposals go on the published benchmarks, beside full-budget TPE
and SMAC3 (issue 43, part 3); `HPO_BOHB_OPTIONS='{"model":"tpe"}'` diagnoses BOHB's TPE,
which full-budget TPE and SMAC3 beat at 132 evaluations. Tuning set only: held-out problems
are refused.

    nice -n 19 .venv-bench/bin/python benchmarks/published_diagnosis.py --seeds 5
    nice -n 19 .venv-bench-smac/bin/python benchmarks/published_diagnosis.py --seeds 2 --part corners \\
        --searchers 'smac3 hyperband+rf' 'optuna tpe' 'hpo bohb'

Parts (`--part`):
- `rungs`: the share of BOHB's budget (counted as in the benchmark: increments) spent in jobs
  at each budget, and the share that went to configs which never reached the full budget.
- `proposals`: the full-fidelity regret of every new config a searcher proposed (its exact
  value at the top, whatever budget it was run at), over the first quarter of the budget and
  the rest: how good the model's proposals are, apart from how the searcher spends budget.
- `rho`: the Spearman rho BOHB's rung-agreement guard computes per budget at the end of the
  run, per seed with the seed's final value (its loss at the top; regret on MFHartmann) and
  over the seeds (and whether it trusts the budget: rho < 0.6 distrusts it), beside the true rank
  correlation of that budget with the top over 3,000 uniform configs, and over the best
  tenth of them at the top (the ranking among good configs is what promotions decide).
- `corners`: where each searcher's final incumbents lie on LCBench (batch_size and
  learning_rate as fractions of their log ranges; within 0.05 of a bound is a corner), how
  they compare with the best of the random sample, and how much the loss rises when the
  incumbent is moved by up to 5% of each range (median over 50 moves): a sharp rise, or a
  value far below anything random finds, suggests an edge of the surrogate, not a region.
- `bounds` (LCBench): how many of a searcher's final incumbents (the best exact value among
  its top-budget configs) have a float parameter on a bound of its range, and which bounds
  (`learning_rate=hi`: the largest learning rate). A draw from a density or a uniform draw
  lands on a bound almost never; a local step clipped to the range does.
- `moves` (rbv2_xgboost, or any space with a `booster`-like choice gating others): what a
  searcher proposes. Per run: the share of its new configs on each value of the space's
  first choice (the booster) and of its final incumbents; and for each new config after the
  first quarter of the budget, its nearest earlier config of the same branch (L-infinity
  distance in the unit cube over the numeric parameters active in both): a "local step" is
  within 0.1 of it with at most 3 numeric parameters changed by more than 0.01 (SMAC3's local
  search moves a few parameters of an incumbent at a time), "far" is more than 0.3 from every
  earlier config of its branch (or the first of its branch), as a random config mostly is.
  And how often the new config is a step from the incumbent of the time (the best at the
  largest budget reached).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks.searchers as harness  # noqa: E402
from benchmarks.mf_problems import Problem  # noqa: E402
from benchmarks.published import DEFAULT_FAMILIES, PEER_RUNNERS, References, problem_rules, run_hpo  # noqa: E402
from benchmarks.published_problems import FAMILIES, LCBENCH_SPACE, published_problems, sample_configs  # noqa: E402
from hpo.search.surrogates.rung_agreement import spearman  # noqa: E402

TOTAL_EVALS = 132


def recorded(problem: Problem, log: list) -> Problem:
    """The problem, with every evaluation (config, budget) appended to `log`."""
    def evaluate(config, budget, run_seed=0):
        log.append((dict(config), float(budget)))
        return problem.evaluate(config, budget, run_seed)
    return Problem(problem.name, problem.space, problem.optimum, evaluate, problem.exact)


def reference(published, cache: str | None) -> float:
    if published.optimum_known:
        return published.problem.optimum
    return References(cache).of(published, [])


def run_logged(name: str, published, seed: int, total: float):
    """(trace, every evaluation as (config, budget))."""
    log: list = []
    problem = recorded(published.problem, log)
    with problem_rules(published):
        if name.startswith("hpo "):
            trace = run_hpo(name[4:], published)(problem, seed, total)
        else:
            trace = PEER_RUNNERS[name](problem, seed, total)
    return trace, log


def final_incumbent(name: str, published, seed: int, total: float):
    """The config of the best exact value among those `name` ran at the top budget in one run
    (None: none reached it)."""
    _, log = run_logged(name, published, seed, total)
    at_top = [c for c, b in log if b >= published.max_budget - 1e-6]
    return min(at_top, key=published.problem.exact) if at_top else None


def rung_shares(published, seeds, total) -> None:
    spent_by_budget: dict[float, list[float]] = {}
    never_top = []
    for seed in seeds:
        record: list = []
        with problem_rules(published):
            run_hpo("bohb", published, record=record)(published.problem, seed, total)
        previous, deepest, by_budget, cost_of = 0.0, {}, {}, {}
        for job, _, spent in record:
            key = repr(sorted(job.config.items()))
            increment = spent - previous
            previous = spent
            by_budget[round(job.budget, 3)] = by_budget.get(round(job.budget, 3), 0.0) + increment
            cost_of[key] = cost_of.get(key, 0.0) + increment
            deepest[key] = max(deepest.get(key, 0.0), job.budget)
        for budget, cost in by_budget.items():
            spent_by_budget.setdefault(budget, []).append(cost / previous)
        never_top.append(sum(c for k, c in cost_of.items() if deepest[k] < published.max_budget - 1e-6) / previous)
    shares = ", ".join(f"{b:g}: {statistics.fmean(v):.0%}" for b, v in sorted(spent_by_budget.items()))
    print(f"  {published.name}: budget share by job budget {shares}; "
          f"on configs that never reached the top {statistics.fmean(never_top):.0%}")


def proposals(published, seeds, total, names, cache) -> None:
    ref = reference(published, cache)
    cells = []
    for name in names:
        early, late = [], []
        for seed in seeds:
            _, log = run_logged(name, published, seed, total)
            seen, spent, cost = set(), {}, 0.0
            for config, budget in log:
                key = repr(sorted(config.items()))
                increment = max(0.0, budget - spent.get(key, 0.0))
                spent[key] = max(budget, spent.get(key, 0.0))
                cost += increment
                if key in seen:
                    continue
                seen.add(key)
                regret = published.problem.exact(config) - ref
                (early if cost <= 0.25 * total else late).append(regret)
        cells.append(f"{name}: {len(early) / len(seeds):.0f}+{len(late) / len(seeds):.0f} new configs per run, "
                     f"median regret {np.median(early):.4g} early, {np.median(late):.4g} late "
                     f"(late best decile {np.quantile(late, 0.1):.4g})")
    print(f"  {published.name}:\n    " + "\n    ".join(cells))


def rho_check(published, seeds, total) -> None:
    guard: dict[float, list[float]] = {}
    for seed in seeds:
        keep: dict = {}
        with problem_rules(published):
            trace = run_hpo("bohb", published, keep=keep)(published.problem, seed, total)
        sampler = keep["searcher"].sampler
        sampler._reliability()
        rhos = getattr(sampler, "rung_agreement", {})
        for budget, rho in rhos.items():
            guard.setdefault(round(budget, 3), []).append(rho)
        # Per seed, so a seed that ends far from the others can be told apart by what it trusted.
        print(f"  {published.name} seed {seed}: final {trace.regret_at(1.0):.4f}, guard rho "
              + ", ".join(f"{b:.3g}: {r:.2f}" for b, r in sorted(rhos.items())), flush=True)
    configs = sample_configs(published.problem.space, 3000, 12345)
    top = np.array([published.problem.evaluate(c, published.max_budget, 0) for c in configs])
    best_tenth = np.argsort(top)[: len(top) // 10]
    parts = []
    for budget in harness.rung_budgets(published.min_budget, published.max_budget, harness.ETA)[:-1]:
        low = np.array([published.problem.evaluate(c, budget, 0) for c in configs])
        rhos = guard.get(round(budget, 3), [])
        guard_text = (f"guard rho {statistics.fmean(rhos):.2f} (min {min(rhos):.2f}, distrusted in "
                      f"{sum(r < 0.6 for r in rhos)}/{len(rhos)} runs)" if rhos else "guard rho n/a")
        parts.append(f"budget {budget:.3g}: {guard_text}; true rho {spearman(low, top):.2f}, "
                     f"among the best tenth {spearman(low[best_tenth], top[best_tenth]):.2f}")
    print(f"  {published.name}:\n    " + "\n    ".join(parts))


def unit(name: str, value: float) -> float:
    """An LCBench parameter's value, as `unit_of` places it in its range."""
    return unit_of(LCBENCH_SPACE[name], value)


def from_unit(name: str, u: float):
    spec = LCBENCH_SPACE[name]
    low, high = spec["low"], spec["high"]
    u = float(np.clip(u, 0.0, 1.0))
    value = float(np.exp(np.log(low) + u * (np.log(high) - np.log(low)))) if spec.get("log") \
        else low + u * (high - low)
    return int(round(value)) if spec["type"] == "int" else value


def corners(published, seeds, total, names, cache) -> None:
    ref = reference(published, cache)
    random_best = References(cache).of(published, []) if cache else None
    rng = np.random.default_rng(0)
    for name in names:
        rows = []
        for seed in seeds:
            incumbent = final_incumbent(name, published, seed, total)
            if incumbent is None:
                continue
            value = published.problem.exact(incumbent)
            moved = []
            for _ in range(50):
                config = {n: from_unit(n, unit(n, incumbent[n]) + rng.uniform(-0.05, 0.05)) for n in LCBENCH_SPACE}
                moved.append(published.problem.exact(config) - value)
            rows.append((unit("batch_size", incumbent["batch_size"]), unit("learning_rate", incumbent["learning_rate"]),
                         value - ref, float(np.median(moved)), incumbent))
        if not rows:
            continue
        corner = sum(min(b, 1 - b) < 0.05 or min(lr, 1 - lr) < 0.05 for b, lr, *_ in rows)
        text = "; ".join(f"bs {b:.2f} lr {lr:.2f} regret {r:.4f} rise {m:+.4f}" for b, lr, r, m, _ in rows)
        print(f"  {published.name} {name}: corners {corner}/{len(rows)}: {text}")
    if random_best is not None:
        print(f"  {published.name}: reference {ref:.4f}")


def bounds(published, seeds, total, names) -> None:
    floats = [n for n, spec in LCBENCH_SPACE.items() if spec["type"] == "float"]
    for name in names:
        on_bound, where, runs = 0, Counter(), 0
        for seed in seeds:
            incumbent = final_incumbent(name, published, seed, total)
            if incumbent is None:
                continue
            runs += 1
            places = {n: unit(n, incumbent[n]) for n in floats}
            sides = [f"{n}={'lo' if u < 0.5 else 'hi'}" for n, u in places.items() if min(u, 1.0 - u) < 1e-6]
            on_bound += bool(sides)
            where.update(sides)
        text = ", ".join(f"{side} {count}" for side, count in where.most_common())
        print(f"  {published.name} {name}: incumbents with a float on a bound {on_bound}/{runs}"
              + (f" ({text})" if text else ""))


def unit_of(spec, value) -> float:
    """A numeric value's place in its range, in log space where the parameter is log-scaled."""
    low, high = float(spec["low"]), float(spec["high"])
    if spec.get("log"):
        return (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    return (value - low) / (high - low)


def step(space, a, b) -> tuple[float, int]:
    """(L-infinity distance, numeric parameters changed by more than 0.01) between two configs
    of one branch, over the numeric parameters active in both."""
    gaps = [abs(unit_of(space[n], a[n]) - unit_of(space[n], b[n])) for n in a
            if n in b and space[n]["type"] != "choice"]
    return (max(gaps) if gaps else 0.0), sum(g > 0.01 for g in gaps)


def moves(published, seeds, total, names) -> None:
    space = published.problem.space
    branch = next(n for n, spec in space.items() if spec["type"] == "choice")
    values = space[branch]["values"]
    for name in names:
        shares, finals, local, far, near_incumbent, fresh = [], [], 0, 0, 0, 0
        for seed in seeds:
            trace, log = run_logged(name, published, seed, total)
            seen, order = set(), []
            incumbent, incumbent_budget, incumbent_value = None, -1.0, math.inf
            for (config, budget), spent in zip(log, trace.costs):     # one trace entry per evaluation
                key = repr(sorted(config.items()))
                if key not in seen:
                    seen.add(key)
                    same = [c for c in order if c[branch] == config[branch]]
                    if spent > 0.25 * total:
                        fresh += 1
                        nearest = min((step(space, config, c) for c in same), default=None)
                        if nearest is not None and nearest[0] <= 0.1 and nearest[1] <= 3:
                            local += 1
                        if nearest is None or nearest[0] > 0.3:
                            far += 1
                        if incumbent is not None and incumbent[branch] == config[branch]:
                            gap, changed = step(space, config, incumbent)
                            near_incumbent += gap <= 0.1 and changed <= 3
                    order.append(config)
                value = published.problem.evaluate(config, budget, seed)
                higher, level = budget > incumbent_budget + 1e-9, abs(budget - incumbent_budget) < 1e-9
                if higher or (level and value < incumbent_value):
                    incumbent, incumbent_budget, incumbent_value = config, budget, value
            shares.append([sum(c[branch] == v for c in order) / len(order) for v in values])
            finals.append(incumbent[branch])
        mean = np.mean(shares, axis=0)
        print(f"  {published.name} {name}: new configs " + ", ".join(f"{v} {m:.0%}" for v, m in zip(values, mean))
              + "; final incumbents " + ", ".join(f"{v} {finals.count(v)}" for v in values)
              + f"; after the first quarter {fresh / len(seeds):.0f} new configs a run: local steps "
              f"{local / max(1, fresh):.0%}, from the incumbent {near_incumbent / max(1, fresh):.0%}, "
              f"far from every earlier one {far / max(1, fresh):.0%}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--part", nargs="*", default=["rungs", "proposals", "rho", "corners"])
    parser.add_argument("--problems", nargs="*")
    parser.add_argument("--searchers", nargs="*", default=["hpo bohb", "optuna tpe"])
    parser.add_argument("--budget", type=int, default=TOTAL_EVALS)
    parser.add_argument("--yahpo-data", default="../shared/benchmarks/yahpo_data")
    parser.add_argument("--cache", default="/tmp/published-cache", help="where published.py keeps references.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    root = Path(__file__).resolve().parents[1]
    data = Path(args.yahpo_data)
    data = data if data.is_absolute() else (root / data).resolve()
    families = FAMILIES if args.problems else DEFAULT_FAMILIES      # a named problem brings its family
    tuning = published_problems("tuning", str(data), families)
    if args.problems and set(args.problems) - set(tuning):
        outside = sorted(set(args.problems) - set(tuning))
        parser.error(f"the diagnosis runs on the tuning set only; not in it: {outside}")
    problems = [tuning[n] for n in (args.problems or tuning)]
    seeds = range(args.seeds)
    for part in args.part:
        print(f"\n## {part} ({args.seeds} seeds, {args.budget} full-budget evaluations)", flush=True)
        for published in problems:
            total = args.budget * published.max_budget
            if part == "rungs":
                rung_shares(published, seeds, total)
            elif part == "proposals":
                proposals(published, seeds, total, args.searchers, args.cache)
            elif part == "rho":
                rho_check(published, seeds, total)
            elif part == "corners" and published.family == "lcbench":
                corners(published, seeds, total, args.searchers, args.cache)
            elif part == "bounds" and published.family == "lcbench":
                bounds(published, seeds, total, args.searchers)
            elif part == "moves" and any(spec["type"] == "choice" for spec in published.problem.space.values()):
                moves(published, seeds, total, args.searchers)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
