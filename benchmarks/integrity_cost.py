"""What the integrity check and the backup add to resuming a large study.

Builds a study of N trials (each with its ask and tell events and a few epochs of metrics,
as a search writes them), then times, in turn and R times each:
  baseline - opening the database as before (connect, WAL pragmas, read the schema version)
  open     - `Study.open`: file checks, PRAGMA quick_check, schema check, then the writable connection
  backup   - `Study.backup()`: SQLite's online backup to study.sqlite.bak
and prints the medians and what check + backup add over the baseline.

    python benchmarks/integrity_cost.py --trials 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from hpo.study import DB_NAME, Study
from hpo.trial import Job, TrialResult

CONFIG = {"layers": 2, "units": 128, "dropout": 0.25, "learning_rate": 0.00123, "optimizer": "adam",
          "batch_size": 64}


def build(folder: Path, trials: int, epochs: int) -> None:
    study = Study.create(folder, {"name": "bench", "space": {}, "search": {"objective": "val_accuracy"}})
    db = study._db
    db.execute("BEGIN")
    now = time.time()
    for t in range(trials):
        job = Job(t, {**CONFIG, "units": 32 + t % 480}, float(1 + t % 27))
        result = TrialResult(value=0.9, metrics={"loss": 0.3, "accuracy": 0.9, "val_loss": 0.35,
                                                 "val_accuracy": 0.9})
        db.execute("INSERT INTO trials (trial_id, lineage, config, budget, state, value, metrics, created_at,"
                   " started_at, finished_at, epochs_trained, attempts) VALUES (?,?,?,?,?,?,?,?,?,?,?,1)",
                   (t, t, json.dumps(job.config, sort_keys=True), job.budget, "complete", 0.9,
                    json.dumps(result.metrics), now, now, now, float(epochs)))
        db.execute("INSERT INTO events (kind, trial_id, payload) VALUES ('ask', ?, ?)",
                   (t, json.dumps(job.to_dict(), sort_keys=True)))
        db.execute("INSERT INTO events (kind, trial_id, payload) VALUES ('tell', ?, ?)",
                   (t, json.dumps(result.to_dict(), sort_keys=True)))
        for e in range(epochs):
            db.execute("INSERT INTO epochs VALUES (?,?,?,?)", (t, e, json.dumps(result.metrics), now))
    db.execute("COMMIT")
    study.close()


def baseline_open(folder: Path) -> None:
    db = sqlite3.connect(folder / DB_NAME, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    db.execute("SELECT count(*) FROM trials").fetchone()
    db.close()


def checked_open(folder: Path) -> None:
    Study.open(folder).close()


def backup(folder: Path) -> None:
    study = Study.open(folder)
    study.backup()
    study.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=3, help="epoch rows per trial")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "study"
        build(folder, args.trials, args.epochs)
        size = (folder / DB_NAME).stat().st_size
        timings: dict[str, list[float]] = {"baseline": [], "open": [], "backup": []}
        for _ in range(args.repeats):
            for name, step in (("baseline", baseline_open), ("open", checked_open), ("backup", backup)):
                started = time.perf_counter()
                step(folder)
                timings[name].append(time.perf_counter() - started)
        med = {name: statistics.median(values) for name, values in timings.items()}
        # `backup` opens (and checks) the study too: its own cost is the difference.
        backup_only = med["backup"] - med["open"]
        check = med["open"] - med["baseline"]
        print(f"study: {args.trials} trials, {args.epochs} epochs each, {size / 1e6:.1f} MB; medians of "
              f"{args.repeats}")
        print(f"baseline open {med['baseline'] * 1e3:.1f} ms; checked open {med['open'] * 1e3:.1f} ms "
              f"({med['open'] / med['baseline']:.1f}x); backup {backup_only * 1e3:.1f} ms")
        print(f"check + backup add {(check + backup_only) * 1e3:.1f} ms to a resume")


if __name__ == "__main__":
    main()
