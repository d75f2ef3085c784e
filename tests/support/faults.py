"""Fault injection for end-to-end tests: watch a study from outside while the real CLI runs
it (tests/support/cli.py starts it), and deliver real signals at chosen moments."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import psutil


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


def wait_for(condition, timeout: float = 300, what: str = "a condition", process=None) -> None:
    """Poll `condition` until it holds. The timeout only bounds a test that is failing: on a
    machine loaded by other jobs, a driver's start-up alone has taken over two minutes."""
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
    """The driver's Python descendants that train: multiprocessing's resource tracker and
    forkserver excluded (the workers forked from the server share its command line, one level
    further down)."""
    out = []
    for child in psutil.Process(driver_pid).children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
            server = "forkserver" in cmdline and child.ppid() == driver_pid
        except psutil.Error:
            continue
        if "python" in cmdline and "resource_tracker" not in cmdline and not server:
            out.append(child)
    return out


def kill(process: psutil.Process | int, sig=signal.SIGKILL) -> None:
    os.kill(process if isinstance(process, int) else process.pid, sig)
