"""Where a searcher's W-worker runs spend the time to their own 1-worker result: choosing the
configs, or promoting them.

    nice -n 19 .venv-bench/bin/python benchmarks/many_workers_diagnosis.py --searchers async_bohb --workers 64 \\
        --tasks '126025 126029 167149 167184' --mfh 'mfh3_moderate mfh6_moderate' --full-evals 60 --seeds 12

For each problem and seed, `many_workers.py`'s two runs of one searcher of ours (1 worker, then W
workers to the window's end, its study kept), and from the W-worker study:
- good configs: those whose exact value is at least as good as the 1-worker run's final one (the
  target). When the first of them started says when the searcher first proposed one;
- a perfect promoter: one that takes each good config to the top budget the moment it starts,
  reaching the target at its start plus its full-budget cost (the earliest over the good
  configs). Its speedup beside the run's own says what the promotions lost;
- the share of uniform configs as good as the target: how far into the tail of the space the
  1-worker run went;
- when the first result at the top budget arrived: until then the model has only the lower
  budgets' results, so a good config started earlier was chosen without one.
Times are in full-budget evaluation lengths (T1 / `--full-evals`).

`--mean-curves 'random asha ...'` adds, from `many_workers.py`'s cache (runs missing from it are
run), the speedup of the mean curves: per problem, the time the mean over seeds of the 1-worker
curve takes to reach its own final value, over the time the mean W-worker curve takes to reach
it; the geometric mean over problems. A run whose 1-worker result is lucky weighs on the per-run
figure; here the seeds are averaged first.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.many_workers as mw  # noqa: E402
from hpo.study import Study  # noqa: E402
from hpo.trial import config_identity  # noqa: E402


@dataclass
class TimeToTarget:
    """One W-worker run against its 1-worker run's final value; times in evaluation lengths."""
    problem: str
    seed: int
    target: float
    one_worker: float                  # when the 1-worker run reached it
    reached: float                     # when the W-worker run reached it (inf: never)
    window: float
    end: float                         # when the W-worker run ended (at or just past its window)
    configs: int                       # configs the W-worker run started
    good: int                          # of them, as good as the target
    first_good: float                  # when the first good one started (inf: none)
    perfect_promoter: float            # its start plus its full-budget cost, the earliest (inf: none)
    uniform_share: float = math.nan    # the share of uniform configs as good as the target
    first_top: float = math.inf        # when the first result at the top budget arrived (inf: none)


def earliest_good(first_starts: Mapping[str, tuple[float, dict]], is_good: Callable[[dict], bool],
                  full_cost: Callable[[dict], float]) -> tuple[int, float, float]:
    """(how many configs are good, when the first good one started, the earliest start plus
    full-budget cost over the good ones), from each config's first start."""
    good = [(start, start + full_cost(config)) for start, config in first_starts.values() if is_good(config)]
    if not good:
        return 0, math.inf, math.inf
    return len(good), min(s for s, _ in good), min(done for _, done in good)


def first_starts(trials) -> dict[str, tuple[float, dict]]:
    """Each config's first start and the config, from a study's trials (a promotion starts later)."""
    out: dict[str, tuple[float, dict]] = {}
    for t in trials:
        if t.started_at is None:
            continue
        key = config_identity(t.config)
        if key not in out or t.started_at < out[key][0]:
            out[key] = (t.started_at, dict(t.config))
    return out


def first_top_result(trials, top_budget: float) -> float:
    """When the first trial at `top_budget` finished with a value (inf: none did)."""
    done = [t.finished_at for t in trials
            if t.budget >= top_budget and t.finished_at is not None and t.value is not None]
    return min(done, default=math.inf)


def speedups(rows: Sequence[TimeToTarget]) -> tuple[float, float]:
    """(per run, with a perfect promoter): geometric means, a run that never reached its target
    counted at its end, as `many_workers.speedup` counts it; the perfect promoter is never later
    than the run."""
    own = [r.one_worker / (r.reached if math.isfinite(r.reached) else r.end) for r in rows]
    perfect = [r.one_worker / min(r.reached if math.isfinite(r.reached) else r.end, r.perfect_promoter)
               for r in rows]
    return mw.geomean(own), mw.geomean(perfect)


def mean_curve_speedup(one_traces: Sequence, many_traces: Sequence, t1: float, window: float,
                       points: int = 2401) -> tuple[float, bool]:
    """(speedup, reached): the time the mean 1-worker curve takes to its own final value over the
    time the mean W-worker curve takes to reach it (at most the window: reached False). A curve
    counts from the time every one of its runs has an incumbent."""
    def mean_curve(traces, horizon):
        grid = np.linspace(0.0, horizon, points)
        values = np.array([[mw.regret_at(trace, t, 0.0) for t in grid] for trace in traces])    # the value at t
        return grid, np.where(np.all(np.isfinite(values), axis=0), np.nan_to_num(values, posinf=0.0).mean(axis=0),
                              np.inf)
    grid1, one = mean_curve(one_traces, t1)
    grid_w, many = mean_curve(many_traces, window)
    target = one[-1]
    took = grid1[np.argmax(one <= target + 1e-12)]
    hit = many <= target + 1e-12
    return took / (grid_w[np.argmax(hit)] if hit.any() else window), bool(hit.any())


def diagnose(problem: mw.SimProblem, searcher: str, workers: int, seed: int, args, uniform: np.ndarray | None,
             options: Mapping) -> TimeToTarget:
    evaluation = problem.t1 / args.full_evals
    one = mw.run_ours(problem, searcher, 1, seed, problem.t1, None, options)
    target = one.trace[-1][1]
    window = problem.t1 * min(1.0, args.window / workers)
    with tempfile.TemporaryDirectory(prefix="hpo-diagnosis-") as folder:
        many = mw.run_ours(problem, searcher, workers, seed, window, None, options,
                           keep_study=Path(folder) / "study")
        study = Study.open(Path(folder) / "study", read_only=True)
        try:
            trials = study.trials()
            starts, top = first_starts(trials), first_top_result(trials, problem.max_budget)
        finally:
            study.close()
    good, first, perfect = earliest_good(starts, lambda c: problem.exact(c) <= target + 1e-12,
                                         lambda c: problem.evaluate(c, problem.max_budget, seed)[1])
    reached, one_worker = mw.time_to(many.trace, target), mw.time_to(one.trace, target)
    share = float(np.mean(uniform <= target + 1e-12)) if uniform is not None else math.nan
    return TimeToTarget(problem.name, seed, target, one_worker / evaluation, reached / evaluation,
                        window / evaluation, many.end / evaluation, len(starts), good, first / evaluation,
                        perfect / evaluation, share, top / evaluation)


def quartiles(values: Sequence[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f}" if values else "-"
    q = statistics.quantiles(values, n=4)
    return f"{q[1]:.2f} ({q[0]:.2f}-{q[2]:.2f})"


def report(rows: Sequence[TimeToTarget]) -> None:
    print("| problem | runs | none good | first good config started: median (quartiles) | first top-budget "
          "result: median | first good started before it | promotion loss: median, max | uniform share as good: "
          "median | speedup: per run, with a perfect promoter |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    groups = {r.problem: [x for x in rows if x.problem == r.problem] for r in rows}
    for name, group in [*groups.items(), ("all", list(rows))]:
        firsts = [r.first_good for r in group if math.isfinite(r.first_good)]
        losses = [r.reached - min(r.reached, r.perfect_promoter) for r in group if math.isfinite(r.reached)]
        shares = [r.uniform_share for r in group if not math.isnan(r.uniform_share)]
        tops = [r.first_top for r in group]
        early = sum(r.first_good < r.first_top for r in group)
        own, perfect = speedups(group)
        print(f"| {name} | {len(group)} | {sum(r.good == 0 for r in group)} | {quartiles(firsts)} | "
              f"{statistics.median(tops):.2f} | {early} | {statistics.median(losses):.2f}, {max(losses):.2f} | "
              f"{statistics.median(shares) if shares else math.nan:.4f} | {own:.1f}x, {perfect:.1f}x |"
              if losses else f"| {name} | {len(group)} | {sum(r.good == 0 for r in group)} | - | - | - | - | - | - |")


def main() -> None:
    parser = mw.arguments(__doc__.split("\n")[0], "async_bohb")
    parser.add_argument("--uniform", type=int, default=5000, help="uniform configs for the tail share (0: none)")
    parser.add_argument("--mean-curves", default="", help="searchers whose mean curves to compare, from the cache")
    parser.add_argument("--runs-json", default="", help="also write each run's record to this JSON-lines file")
    parser.set_defaults(workers="64")
    args = parser.parse_args()
    logging.getLogger("hpo").setLevel(logging.ERROR)
    problems, searchers, workers, seeds = mw.setting(args)
    if len(workers) != 1 or workers[0] < 2:
        parser.error(f"--workers: one count above 1, against which the 1-worker runs are read; got {args.workers!r}")
    options = json.loads(args.options or "{}")
    # Each problem's uniform configs once, whatever the searchers: the surrogate is the slow part.
    uniform = {problem.name: np.array([problem.exact(c) for c in mw.sample_configs(problem.space, args.uniform,
                                                                                  seed=777)])
               for problem in problems} if args.uniform else {}
    for searcher in searchers:
        rows = []
        for problem in problems:
            for seed in seeds:
                row = diagnose(problem, searcher, workers[0], seed, args, uniform.get(problem.name),
                               options.get(searcher, {}))
                print(f"# {json.dumps(asdict(row))}", flush=True)
                if args.runs_json:
                    with open(args.runs_json, "a") as sink:
                        sink.write(json.dumps(asdict(row)) + "\n")
                rows.append(row)
        print(f"\n## {searcher}, {workers[0]} workers, seeds {seeds}\n")
        report(rows)
    if args.mean_curves:
        args.no_stop = True
        lines = []
        for searcher in mw._names(args.mean_curves):
            runs = mw.collect(problems, [searcher], workers, seeds, args,     # peers' runs: their own script's
                              None if searcher.startswith("syne ") else mw.run_one)
            ratios, per_run = [], []
            for problem in problems:
                window = problem.t1 * min(1.0, args.window / workers[0])
                ones = [runs[(problem.name, searcher, 1, s)] for s in seeds]
                manys = [runs[(problem.name, searcher, workers[0], s)] for s in seeds]
                ratios.append(mean_curve_speedup([r.trace for r in ones], [r.trace for r in manys], problem.t1,
                                                 window)[0])
                per_run += [mw.speedup(one, many, one.trace[-1][1])[0] for one, many in zip(ones, manys)]
            lines.append(f"| {searcher} | {mw.geomean(ratios):.1f}x | {mw.geomean(per_run):.1f}x |")
        print(f"\n## Mean curves, {workers[0]} workers\n\n| searcher | mean curves | per run |\n| --- | --- | --- |")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
