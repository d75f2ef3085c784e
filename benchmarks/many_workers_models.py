"""Two settings of one searcher of ours on 1 to 256 simulated workers, side by side: regret at
equal simulated time, and each one's speedup to its own, the other's and a third searcher's
1-worker result.

    cd WORKTREE    # the checkout under test comes first on sys.path
    nice -n 19 .venv-bench/bin/python benchmarks/many_workers_models.py --seeds '0 1 2' --cache C \\
        --tasks '126025 126029 167149 167184' --mfh 'mfh3_moderate mfh6_moderate' --full-evals 60

The runs are `benchmarks/many_workers.py`'s (the same problems, windows and cache; every run
goes to its window's end, as its `--no-stop`), so a run either script made is read, not made
again. Per worker count it prints:
- the ratio of the second setting's regret to the first's at a quarter of the window and at its
  end: per problem the mean over seeds (LCBench's reference the lowest value any of these runs
  reached, MFHartmann's its optimum), then the geometric mean over problems;
- speedups (geometric mean over problems and seeds; in brackets the runs that never got
  there, counted at their window's end): the time a 1-worker run took to its final regret
  over the time the W-worker run took to the same regret, where the 1-worker run is each
  setting's own, the first setting's, and `--reference`'s (default `bohb`, the inline
  backend's default, run on one worker).
With `--tag` (runs an older checkout made) it only reads the cache.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.many_workers import (  # noqa: E402
    arguments,
    collect,
    geomean,
    lowest_values,
    regret_at,
    run_one,
    setting,
    speedup,
    warnings_off,
)


def main() -> None:
    parser = arguments(__doc__.split("\n")[0], "async_bohb")
    parser.add_argument("--settings", default='[{"model": "tpe"}, {"model": "gp"}]',
                        help="JSON: the two search.options of --searchers' one searcher to compare")
    parser.add_argument("--reference", default="bohb", help="a searcher of ours whose 1-worker final is a third target")
    args = parser.parse_args()
    args.no_stop = True
    problems, searchers, workers, seeds = setting(args)
    if len(searchers) != 1:
        raise SystemExit(f"expected one searcher in --searchers, got {searchers}")
    searcher, settings = searchers[0], json.loads(args.settings)
    if not (isinstance(settings, list) and len(settings) == 2 and all(isinstance(s, dict) for s in settings)):
        raise SystemExit(f"expected --settings to be a JSON list of two option dicts, got {args.settings}")
    # With another source's --tag the cache is only read: the code here would not make its runs.
    run = None if args.tag else run_one
    runs = []
    for options in settings:
        args.options = json.dumps({searcher: options})
        runs.append(collect(problems, [searcher], workers, seeds, args, run))
    args.options = "{}"
    reference = collect(problems, [args.reference], [1], seeds, args, run)
    report(problems, searcher, settings, args.reference, workers, seeds, runs, reference)


def report(problems, searcher, settings, reference_name, workers, seeds, runs, reference) -> None:
    lowest = lowest_values(problems, *runs)
    first, second = (json.dumps(s, sort_keys=True) for s in settings)
    print(f"\n{searcher}: A = {first}, B = {second}; seeds {seeds}; problems {', '.join(p.name for p in problems)}")
    print(f"| workers | B / A at a quarter | B / A at the end | speedup to its own 1-worker final: A, B "
          f"| to A's 1-worker final: A, B | to {reference_name}'s 1-worker final: A, B |")
    print("| --- | --- | --- | --- | --- | --- |")
    for w in workers:
        ratios = ([], [])
        for p in problems:
            means = [[statistics.mean(regret_at(found[(p.name, searcher, w, s)].trace, share *
                                                found[(p.name, searcher, w, s)].window, lowest[p.name])
                                      for s in seeds) for share in (0.25, 1.0)] for found in runs]
            for i in (0, 1):
                ratios[i].append(max(means[1][i], 1e-4) / max(means[0][i], 1e-4))
        cells = [f"{geomean(ratios[0]):.3f}", f"{geomean(ratios[1]):.3f}"]
        if w == 1:
            cells += ["", "", ""]
        else:
            # The 1-worker runs whose final regret is the target: each setting's own, A's, the reference's.
            for target_of in (lambda found: (found, searcher), lambda found: (runs[0], searcher),
                              lambda found: (reference, reference_name)):
                pair = []
                for found in runs:
                    ones, name = target_of(found)
                    measured = [speedup(ones[(p.name, name, 1, s)], found[(p.name, searcher, w, s)],
                                        ones[(p.name, name, 1, s)].trace[-1][1]) for p in problems for s in seeds]
                    pair.append(f"{geomean([value for value, _ in measured]):.1f}x "
                                f"({sum(missed for _, missed in measured)})")
                cells.append(", ".join(pair))
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    with warnings_off():
        main()
