"""Another driver for lock tests: a process that holds a study's lock (the experiment it
locks: tests.support.experiments.LOCKED)."""

import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT, cli_env


def hold_lock(folder: Path) -> subprocess.Popen:
    """Another driver: a process that holds the study's lock until it is killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from hpo.study.lock import acquire; acquire(sys.argv[1]); "
         "print('held', flush=True); time.sleep(120)", str(folder)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env=cli_env())
    assert proc.stdout.readline().strip() == "held"
    return proc
