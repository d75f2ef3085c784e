"""Another driver for lock tests: a process that holds a study's lock, and a tiny experiment."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def hold_lock(folder: Path) -> subprocess.Popen:
    """Another driver: a process that holds the study's lock until it is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from hpo.study.lock import acquire; acquire(sys.argv[1]); "
         "print('held', flush=True); time.sleep(120)", str(folder)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline().strip() == "held"
    return proc


EXPERIMENT = """\
name: locked
data: {dataset: digits, limit: 100}
space:
  units: {type: int, low: 8, high: 16}
search: {algorithm: random, max_trials: 2, max_budget: 1}
"""
