"""The main job as a newcomer runs it: wall and CPU time, start-up share, accuracy, brackets.

    python benchmarks/main_job.py                                  # experiments/mnist.yaml, ~3 minutes
    python benchmarks/main_job.py --experiment X.yaml --set search.max_trials=20

Runs `python -m hpo search EXPERIMENT` in a fresh temporary folder (a new study, nothing
cached from an earlier run), then `python -m hpo best --export` on it, each as its own
process, and prints:
- wall seconds of the search command, its CPU seconds (user + system of it and its worker
  processes) and CPU / wall (at most the core count);
- start-up share: the sum of every trial's `startup_seconds` (job start to its first step,
  plus what its first compiled call took beyond training its own steps) over the sum
  of the trials' worker time (marked running to finished, which for a worker's first trial
  includes the worker process starting), and over the trials' own training time (the sum of
  their `epoch_seconds`, which the first epoch's start-up is part of);
- the best val_accuracy, the held-out test accuracy `hpo best --export` prints, and the
  Hyperband brackets whose every rung completed, against those one iteration has.
Wall time means something only on an otherwise idle machine; CPU time holds up under load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import cpu_description  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run `command`; (result, wall seconds, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout[-3000:]}"
                         f"\n{result.stderr[-3000:]}")
    return result, wall, cpu


def study_figures(study_dir: Path) -> dict:
    """Start-up share, best objective, and complete brackets, read from the study's own tables."""
    from hpo.search.schedule import hyperband_brackets

    db = sqlite3.connect(f"file:{study_dir / 'study.sqlite'}?mode=ro", uri=True)
    experiment = json.loads(db.execute("SELECT value FROM meta WHERE key = 'experiment'").fetchone()[0])
    search = experiment["search"]
    startup = worker = training = 0.0
    for trial_id, started, finished in db.execute(
            "SELECT trial_id, started_at, finished_at FROM trials WHERE state = 'complete'"):
        epochs = [json.loads(m) for (m,) in db.execute(
            "SELECT metrics FROM epochs WHERE trial_id = ? ORDER BY epoch", (trial_id,))]
        if not epochs or started is None or finished is None:
            continue
        startup += epochs[0].get("startup_seconds") or 0.0
        training += sum(e.get("epoch_seconds", 0.0) for e in epochs)
        worker += finished - started
    rows = db.execute("SELECT bracket, rung, state FROM trials").fetchall()
    complete_brackets = planned = 0
    if search["algorithm"] in ("hyperband", "bohb", "async_hyperband"):
        plan = hyperband_brackets(search["min_budget"], search["max_budget"], search["eta"])
        planned = len(plan)
        # A trial's bracket is the bracket's s; its last rung is rung s.
        for bracket in plan:
            done = sum(1 for b, r, state in rows if b == bracket.s and r == bracket.s and state == "complete")
            complete_brackets += done >= bracket.rungs[-1].n_configs
    sign = 1 if search["direction"] == "maximize" else -1
    values = [v for (v,) in db.execute("SELECT value FROM trials WHERE state = 'complete' AND value IS NOT NULL")]
    return {"objective": search["objective"], "best": max(values, key=lambda v: sign * v) if values else None,
            "trials": len(rows), "startup_s": startup, "worker_s": worker, "training_s": training,
            "complete_brackets": complete_brackets, "brackets_per_iteration": planned}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=str(ROOT / "experiments" / "mnist.yaml"))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="main-job-"))
    study_dir = folder / "study"
    overrides = [part for item in args.set for part in ("--set", item)]
    _, wall, cpu = timed([sys.executable, "-m", "hpo", "search", args.experiment, "--study-dir", str(study_dir),
                          *overrides])
    exported, _, export_cpu = timed([sys.executable, "-m", "hpo", "best", str(study_dir), "--export",
                                     str(folder / "best.keras"), "--json"])
    record = json.loads(exported.stdout[exported.stdout.index("{"):])
    figures = study_figures(study_dir)
    test = record["export"]["test_accuracy"]
    print(f"main job {Path(args.experiment).name} {' '.join(args.set)}; {cpu_description()}")
    print(f"search: wall {wall:.1f} s, CPU {cpu:.1f} s (user+sys, workers included; {cpu / wall:.2f} cores busy), "
          f"{figures['trials']} trials")
    startup, worker, training = figures["startup_s"], figures["worker_s"], figures["training_s"]
    print(f"start-up: {startup:.1f} s of {worker:.1f} worker-seconds ({100 * startup / max(worker, 1e-9):.1f}%); "
          f"of the trials' own {training:.1f} s of epochs, {100 * startup / max(training, 1e-9):.1f}%")
    print(f"best {figures['objective']} {figures['best']:.4f}; held-out test accuracy "
          f"{'n/a' if test is None else f'{test:.4f}'} ({record['export']['test_examples']} examples; "
          f"export CPU {export_cpu:.1f} s)")
    print(f"Hyperband brackets complete: {figures['complete_brackets']} of {figures['brackets_per_iteration']}")
    print(f"study: {study_dir}")


if __name__ == "__main__":
    main()
