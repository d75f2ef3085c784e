"""The driver's decision time over long searches: ask, tell and the study's record per job.

    nice -n 19 python benchmarks/decision_time.py --quick            # 1,000 jobs, every searcher
    nice -n 19 python benchmarks/decision_time.py --jobs 10000 --searchers bohb asha
    nice -n 19 python benchmarks/decision_time.py --jobs 3000 --searchers bohb --profile   # cProfile

A new user's search: `hpo.optimize` over a cheap 7-parameter function (six floats and one
choice), `min_budget=1, max_budget=27`, with the study on disk (`study_dir`). The objective
costs microseconds, so the time between one call of it and the next is the driver's:
the searcher's tell and ask and the study's writes. Per searcher the table gives the median
of those gaps over the first 10% of the jobs (the first gap, which includes the study's
creation, left out) and over the 10% of jobs ending at each checkpoint (1,000, 3,000 and
10,000 jobs, those the run reaches; `--checkpoints` sets others), from one run, as
"wall / CPU" milliseconds: wall-clock time, and the process's CPU time (all its threads),
which a busy machine inflates less. `bohb:floats` is BOHB on the same function with the
choice replaced by a seventh float: there its Gaussian process proposes (a space with an
unordered choice keeps the TPE's proposals); `bohb:floats:no-resume` the same with
`resumes: false` (each budget trains afresh, as on data-fraction budgets), where the process
fits every trusted budget's results; `async_bohb:floats` is `async_bohb` with `model: gp` there.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hpo  # noqa: E402
from hpo.search import SEARCHERS  # noqa: E402

SPACE = {
    **{f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(5)},
    "lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "kind": {"type": "choice", "values": ["a", "b", "c"]},
}
SHIFT = {"a": 0.0, "b": 0.3, "c": 0.6}
FLOATS = {**{k: v for k, v in SPACE.items() if k != "kind"}, "x5": {"type": "float", "low": 0.0, "high": 1.0}}
# name -> (searcher, space, search options)
VARIANTS = {"bohb:floats": ("bohb", FLOATS, {}), "bohb:floats:no-resume": ("bohb", FLOATS, {"resumes": False}),
            "async_bohb:floats": ("async_bohb", FLOATS, {"model": "gp"})}


def objective(config, budget: float) -> float:
    """A cheap multi-fidelity function: a bowl around 0.3 in every float, lr best near 1e-2,
    one choice better than the others, and a 1 / budget term that lower budgets pay."""
    bowl = sum((config[f"x{i}"] - 0.3) ** 2 for i in range(5))
    return bowl + (math.log10(config["lr"]) + 2.0) ** 2 / 4 + SHIFT[config["kind"]] + 1.0 / budget


def objective_floats(config, budget: float) -> float:
    return objective({**config, "kind": "a"}, budget) + (config["x5"] - 0.3) ** 2


def measure(name: str, jobs: int, seed: int = 0, profile: bool = False) -> tuple[list[float], list[float], str]:
    """The gaps (seconds of wall time, and of the process's CPU time) between consecutive
    objective calls of one search of `jobs` jobs, and cProfile's report where `profile`."""
    searcher, space, options = VARIANTS.get(name, (name, SPACE, {}))
    function = objective_floats if space is FLOATS else objective
    stamps: list[float] = []
    cpu: list[float] = []

    def timed(config, budget):
        stamps.append(time.perf_counter())
        cpu.append(time.process_time())
        return function(config, budget)

    profiler = cProfile.Profile() if profile else None
    with tempfile.TemporaryDirectory(prefix="decision-time-") as folder:
        if profiler:
            profiler.enable()
        hpo.optimize(timed, space, searcher, min_budget=1, max_budget=27, max_trials=jobs, seed=seed,
                     study_dir=Path(folder) / "study", options=options)
        if profiler:
            profiler.disable()
    report = ""
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
        report = out.getvalue()
    return [b - a for a, b in zip(stamps, stamps[1:])], [b - a for a, b in zip(cpu, cpu[1:])], report


def median_ms(gaps: list[float]) -> float:
    return 1000 * statistics.median(gaps) if gaps else math.nan


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per search (default 10000)")
    parser.add_argument("--quick", action="store_true", help="1,000 jobs (checkpoints 300 and 1000)")
    parser.add_argument("--searchers", nargs="*", default=[*SEARCHERS, *VARIANTS], choices=[*SEARCHERS, *VARIANTS])
    parser.add_argument("--checkpoints", type=int, nargs="*", default=None,
                        help="job counts at which to report the median of the preceding 10%% of gaps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true", help="print cProfile's report of each search")
    args = parser.parse_args(argv)
    jobs = 1000 if args.quick else args.jobs
    checkpoints = args.checkpoints or ([300, 1000] if args.quick else [c for c in (1000, 3000, 10_000) if c <= jobs])
    checkpoints = [c for c in checkpoints if c <= jobs]
    head = ["searcher", "first 10% (ms)"] + [f"last 10% of {c} (ms)" for c in checkpoints] + ["wall (s)"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    reports = []
    for name in args.searchers:
        started = time.perf_counter()
        gaps, cpu, report = measure(name, jobs, args.seed, args.profile)
        wall = time.perf_counter() - started
        first = slice(1, max(2, len(gaps) // 10))
        cells = [name, f"{median_ms(gaps[first]):.2f} / {median_ms(cpu[first]):.2f}"]
        for c in checkpoints:
            window = slice(max(0, c - 1 - c // 10), c - 1)
            cells.append(f"{median_ms(gaps[window]):.2f} / {median_ms(cpu[window]):.2f}")
        cells.append(f"{wall:.1f}")
        print("| " + " | ".join(cells) + " |", flush=True)
        if report:
            reports.append((name, report))
    for name, report in reports:
        print(f"\n--- cProfile: {name} ---\n{report}")


if __name__ == "__main__":
    main()
