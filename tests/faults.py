"""Fault injection for end-to-end tests: run the real CLI in a subprocess, watch its study
from outside, and deliver real signals at chosen moments."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil

from hpo.study import Study

ROOT = Path(__file__).resolve().parents[1]
SMOKE = str(ROOT / "experiments" / "smoke.yaml")


def cli_env() -> dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "200",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def hpo(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpo", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=cli_env())


def start_hpo(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hpo", *args], cwd=ROOT, env=cli_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def query(study_dir: Path, sql: str, args=()) -> list[tuple]:
    """Read the study the way an outside observer would (the driver may be writing)."""
    path = study_dir / "study.sqlite"
    if not path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:     # schema not written yet
        return []


def wait_for(condition, timeout: float = 120, what: str = "a condition", process=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"the driver exited ({process.returncode}) before {what}:\n{err[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def running_trial_with_epochs(study_dir: Path, epochs: int) -> int | None:
    rows = query(study_dir, "SELECT t.trial_id FROM trials t WHERE t.state='running' AND "
                            "(SELECT COUNT(*) FROM epochs e WHERE e.trial_id=t.trial_id) >= ?", (epochs,))
    return rows[0][0] if rows else None


def worker_processes(driver_pid: int) -> list[psutil.Process]:
    """The driver's Python children that train (multiprocessing's resource tracker excluded)."""
    out = []
    for child in psutil.Process(driver_pid).children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "python" in cmdline and "resource_tracker" not in cmdline:
            out.append(child)
    return out


def kill(process: psutil.Process | int, sig=signal.SIGKILL) -> None:
    os.kill(process if isinstance(process, int) else process.pid, sig)


def assert_parallel_smoke_run(done, study_dir):
    """The smoke experiment finished all 8 trials, at least two of them at the same time."""
    assert done.returncode == 0, done.stderr[-3000:]
    trials = Study.open(study_dir).trials()
    assert len(trials) == 8 and all(t.state.value == "complete" for t in trials)
    spans = sorted((t.started_at, t.finished_at) for t in trials)
    assert any(c < b for (a, b), (c, d) in zip(spans, spans[1:])), f"no two trials overlapped: {spans}"
    return trials


def hpo_here(capsys, *args) -> subprocess.CompletedProcess:
    """The CLI's entry point called in this test process, with the same result shape as `hpo`.

    For tests whose subject is what a command does, not how a fresh process starts: the
    test process has TensorFlow imported already, so this saves a process start and its
    TensorFlow import. Python warnings are not on its stderr (pytest records them)."""
    from hpo.cli import main
    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["hpo", *args], code, out, err)
