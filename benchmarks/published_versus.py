"""One of our searchers against every other searcher in `published.py`'s cache, ours and the
peers', or against one (`--against`), per tuning problem of one family (LCBench by default,
MFHartmann or rbv2_xgboost): its mean final regret over the best other's, the geometric mean
and the worst ratio. Nothing runs:
every outcome comes from the cache (fill it with `published.py` first), scored against the same
references as `published.py` scores BOHB.

    .venv-bench/bin/python benchmarks/published_versus.py --cache /tmp/published-cache \\
        --searcher "hpo freeze_thaw" --seeds 20 [--with-options '{"model": "gp"}'] [--against "hpo bohb"]

`--with-options` also counts "hpo bohb" run with those `HPO_BOHB_OPTIONS` as another searcher.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import benchmarks.published as pub  # noqa: E402
from benchmarks.searchers import geomean_of, mean_final, regret_ratio  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--searcher", default="hpo freeze_thaw", choices=pub.NAMES)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, nargs="*", choices=pub.BUDGETS, default=list(pub.BUDGETS))
    parser.add_argument("--with-options", default=None, help="JSON: also count 'hpo bohb' with these options")
    parser.add_argument("--yahpo-data", default="../shared/benchmarks/yahpo_data")
    parser.add_argument("--family", choices=pub.FAMILIES, default="lcbench")
    parser.add_argument("--against", default=None, choices=pub.NAMES, help="only this searcher, not the best other")
    parser.add_argument("--tags", default=None,
                        help="hpo source hashes whose runs to read, comma-separated, the first holding a seed "
                             "wins (default: the current source's)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    root = Path(__file__).resolve().parents[1]
    every = pub.published_problems("tuning", str((root / args.yahpo_data).resolve()), (args.family,))
    tag = args.tags or pub.hpo_source_hash()
    caches = [pub.Cache(args.cache, every, one) for one in tag.split(",")]
    extra = None
    if args.with_options:
        extra = (f"hpo bohb {args.with_options}",
                 pub.Cache(args.cache, every, tag.split(",")[0], json.loads(args.with_options)))
    references = pub.References(args.cache)           # read, never saved
    seeds = range(args.seeds)
    print(f"{args.searcher} against {args.against or 'every other searcher'} cached (hpo searchers {tag}), "
          f"seeds 0..{args.seeds - 1}")
    for total_evals in args.budget:
        ratios = []
        print(f"\nbudget {total_evals} full-budget evaluations")
        for published in every.values():
            raw = {(name, t): cached(caches, name, published.problem, seeds, t * published.max_budget)
                   for name in pub.NAMES for t in pub.BUDGETS}
            if extra:
                for t in pub.BUDGETS:
                    raw[extra[0], t] = extra[1].cached("hpo bohb", published.problem, seeds, t * published.max_budget)
            # Where the optimum is known (MFHartmann) the outcomes are regrets already, as
            # published.py reads them; elsewhere against the best any run or the random sample reached.
            reference = 0.0 if published.optimum_known else \
                references.of(published, [o for runs in raw.values() for o in runs])
            runs = {name: pub.shifted(outcomes, reference) for (name, t), outcomes in raw.items()
                    if t == total_evals and outcomes}
            if args.searcher not in runs:
                print(f"  {published.name:16s} no runs of {args.searcher} cached")
                continue
            ours = mean_final(runs[args.searcher])
            others = {name: mean_final(r) for name, r in runs.items()
                      if name != args.searcher and args.against in (None, name)}
            if not others:
                print(f"  {published.name:16s} no runs of {args.against} cached")
                continue
            best = min(others, key=others.get)
            ratio = float(regret_ratio(ours, others[best]))
            ratios.append(ratio)
            print(f"  {published.name:16s} {ours:.5f} ({len(runs[args.searcher])} seeds) against {best} "
                  f"{others[best]:.5f} ({len(runs[best])}): {ratio:.3f}")
        if ratios:
            print(f"  geometric mean {geomean_of(ratios):.3f}, worst {max(ratios):.3f}, "
                  f"best of all on {sum(r <= 1 for r in ratios)} of {len(ratios)}")


def cached(caches, name: str, problem, seeds: range, total: float) -> list:
    """Each seed's outcome from the first cache (source hash) that holds it."""
    outcomes = []
    for seed in seeds:
        for cache in caches:
            found = cache.cached(name, problem, range(seed, seed + 1), total)
            if found:
                outcomes += found
                break
    return outcomes


if __name__ == "__main__":
    main()
